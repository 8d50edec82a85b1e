package synthetic

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"strconv"
	"strings"

	"github.com/genway/genway/shared/catalog"
	"github.com/genway/genway/shared/jobs"
	"github.com/genway/genway/shared/media"
)

// FailPrefix makes a synthetic job or chat request fail on purpose, so that
// failure paths can be exercised end to end.
const FailPrefix = "fail:"

// Media is the synthetic job provider: it synthesises real, playable media
// of the requested duration, format and size, deterministically from the
// prompt (package media does the synthesis): MP3 or WAV audio, and H.264
// video in MP4 (a video's odd side is made one pixel longer, as H.264
// needs, and the result says so). A prompt beginning with
// FailPrefix fails the job with error code upstream_error. Safe for
// concurrent use.
type Media struct{}

var _ jobs.Provider = Media{}

// Start implements jobs.Provider: the synthetic provider is synchronous.
func (m Media) Start(ctx context.Context, _ *catalog.Model, j *jobs.Job) (*jobs.Step, error) {
	data, res, err := m.generate(ctx, j)
	if err != nil {
		return nil, err
	}
	res.Body, res.Size = io.NopCloser(bytes.NewReader(data)), int64(len(data))
	return &jobs.Step{Result: res}, nil
}

func (Media) generate(ctx context.Context, j *jobs.Job) ([]byte, *jobs.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	in := j.Input
	if strings.HasPrefix(strings.TrimSpace(in.Prompt), FailPrefix) {
		return nil, nil, &jobs.ProviderError{Code: jobs.CodeUpstream, Message: "The synthetic provider failed this job on request (prompt starts with \"fail:\")."}
	}
	seed := Seed(j.Type, in.Prompt, in.Lyrics, in.Category)
	res := &jobs.Result{Duration: in.Duration}
	var data []byte
	var err error
	switch j.Type {
	case jobs.TypeMusic, jobs.TypeSFX:
		kind := media.Music
		if j.Type == jobs.TypeSFX {
			kind = media.SFX
		}
		data, res.ContentType, err = media.Audio(kind, seed, in.Duration, in.Format)
		res.Ext = in.Format
	case jobs.TypeVideo:
		w, h, perr := parseSize(in.Size)
		if perr != nil {
			return nil, nil, &jobs.ProviderError{Code: jobs.CodeInternal, Message: "invalid video size", Err: perr}
		}
		data, err = media.Video(seed, in.Duration, w, h)
		res.Width, res.Height = media.VideoSize(w, h) // an odd side is made one pixel longer
		res.ContentType, res.Ext = media.ContentTypeMP4, "mp4"
	default:
		return nil, nil, &jobs.ProviderError{Code: jobs.CodeInternal, Message: fmt.Sprintf("unknown job type %q", j.Type)}
	}
	if errors.Is(err, media.ErrInvalidArgument) {
		return nil, nil, &jobs.ProviderError{Code: jobs.CodeInternal, Message: "The synthetic provider cannot make media with these parameters.", Err: err}
	}
	if err != nil {
		return nil, nil, fmt.Errorf("synthesise %s: %w", j.Type, err)
	}
	return data, res, nil
}

// Seed derives the synthesis seed from the job's text, so the same request
// always yields the same media.
func Seed(parts ...string) uint64 {
	h := fnv.New64a()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return h.Sum64()
}

func parseSize(s string) (int, int, error) {
	ws, hs, ok := strings.Cut(s, "x")
	w, err1 := strconv.Atoi(ws)
	h, err2 := strconv.Atoi(hs)
	if !ok || err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("bad size %q", s)
	}
	return w, h, nil
}
