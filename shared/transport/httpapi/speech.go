package httpapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/genway/genway/shared/route"
	"github.com/genway/genway/shared/speech"
)

// Speech serves POST /v1/audio/speech, OpenAI's text to speech, for the
// account in the request context (see Authenticated): the request rules
// are package speech's, and one call, speech.Service.Speak, does the rest.
//
// The answer is the audio itself, streamed: status 200 and the format's
// Content-Type (audio/mpeg, audio/wav, audio/ogg for opus, audio/aac,
// audio/flac, audio/pcm) are sent with the first audio byte, then each
// piece of audio as the vendor sends it, flushed at once (chunked transfer
// encoding: the length is not known), so that a long text starts playing
// as soon as its first words are made. X-Genway-Attempts names the
// attempts made (the model that answered last), X-Genway-Cost what the
// speech is charged once its audio reaches the client (decimal credits:
// its price is known before the audio starts), and
// X-Genway-Generation-Id its id, the key of its record (GET
// /v1/generations/{id}).
//
// Errors before the first byte are ordinary JSON error responses, with
// X-Genway-Attempts when a vendor was tried. After it, a vendor failure
// cuts the response short (the connection is closed without the last
// chunk, http.ErrAbortHandler), so that a client cannot take a truncated
// file for a whole one. When the client goes away the vendor request is
// cancelled (it runs under the request's context).
func Speech(svc *speech.Service, log *slog.Logger) http.Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return serve(log, func(w http.ResponseWriter, r *http.Request) error {
		var req speech.Request
		body, err := readBody(r)
		if err == nil {
			err = unmarshal(body, &req)
		}
		if err != nil {
			return err
		}
		ctx := r.Context()
		noteModel(ctx, req.Model)
		sw := &speechWriter{w: w, rc: http.NewResponseController(w), ctx: ctx}
		return speechError(w, r, log, sw, svc.Speak(ctx, account(r), &req, sw))
	})
}

// Headers of a speech answer: its cost (decimal credits) and its id,
// the key of its record.
const (
	CostHeader       = "X-Genway-Cost"
	GenerationHeader = "X-Genway-Generation-Id"
)

// speechError is what the speech handler's error err needs besides an
// ordinary error response: the attempts header (while no audio was
// sent); nothing more if the client has gone; once audio was sent, the
// response cut short (it panics with http.ErrAbortHandler). It returns
// err while no audio was sent, for serve to answer, else nil.
func speechError(w http.ResponseWriter, r *http.Request, log *slog.Logger, sw *speechWriter, err error) error {
	if err == nil {
		return nil
	}
	ctx := r.Context()
	rid := RequestID(ctx)
	var ae *route.AttemptsError
	if errors.As(err, &ae) && len(ae.Attempts) > 0 {
		noteRoute(ctx, "", len(ae.Attempts))
		if !sw.began {
			w.Header().Set(AttemptsHeader, route.FormatAttempts(ae.Attempts))
		}
	}
	switch {
	case ctx.Err() != nil:
		log.InfoContext(ctx, "speech: client went away", "request_id", rid, "began", sw.began, "err", err)
		return nil
	case !sw.began:
		return err
	}
	log.ErrorContext(ctx, "speech: audio failed after it began; the response is cut short", "request_id", rid, "err", err)
	panic(http.ErrAbortHandler)
}

// speechWriter is the speech.Writer of a response: the headers at Begin,
// then each piece of audio written and flushed; a client that stops
// reading is dropped after StreamWriteTimeout.
type speechWriter struct {
	w     http.ResponseWriter
	rc    *http.ResponseController
	ctx   context.Context
	began bool
}

// Begin sends the status and headers of the answer.
func (s *speechWriter) Begin(a speech.Answer) error {
	noteRoute(s.ctx, a.Model, len(a.Attempts))
	h := s.w.Header()
	h.Set("Content-Type", a.ContentType)
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	h.Set(AttemptsHeader, route.FormatAttempts(a.Attempts))
	h.Set(CostHeader, a.Cost.String())
	h.Set(GenerationHeader, a.ID)
	s.began = true
	s.w.WriteHeader(http.StatusOK)
	return nil
}

// Write sends p to the client at once.
func (s *speechWriter) Write(p []byte) (int, error) {
	// The deadline moves on with every write (ErrNotSupported where
	// there are no deadlines).
	s.rc.SetWriteDeadline(time.Now().Add(StreamWriteTimeout))
	n, err := s.w.Write(p)
	if err != nil {
		return n, err
	}
	if err := s.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return n, err
	}
	return n, nil
}
