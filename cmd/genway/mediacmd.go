package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"image"
	_ "image/jpeg" // the size of a JPEG written
	_ "image/png"  // the size of a PNG written
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/genway/genway/shared/transport/httpapi"
)

const imagesUsage = `Usage:
  genway images generate --model ID --prompt TEXT --output FILE [--n N] [--size WxH] [--quality Q]
                         [--format png|jpeg|webp] [--response-format b64_json|url]
      generate images through the public API (GENWAY_URL, default the local server; GENWAY_API_KEY)
      and write them: with --n 1 (the default) to FILE; with --n above 1 to FILE with -1, -2, ...
      before its extension (--output cat.png: cat-1.png, cat-2.png, ...). --response-format is how
      the images travel (the model's default if unset); links are downloaded.
`

const speechUsage = `Usage:
  genway speech --model ID [--voice V] [--format mp3|wav|opus|aac|flac|pcm] [--speed S] [--instructions TEXT]
                [--input TEXT | --input-file FILE] --output FILE|-
      speak text (--input, --input-file, or else stdin) through the public API (GENWAY_URL, default
      the local server; GENWAY_API_KEY). The audio is written as it arrives (--output -: to stdout);
      FILE appears only once the whole audio has arrived, so a failed call leaves none.
`

// mediaTimeout bounds one images or speech call, the audio's streaming
// included: longer than any the API allows.
const mediaTimeout = 30 * time.Minute

// maxImagesAnswer bounds the JSON answer of an images call (up to ten
// large images in base64).
const maxImagesAnswer = 1 << 30

// imagesReply is the part of a POST /v1/images/generations answer the
// CLI reads. Error is set when the call failed after the server had
// committed its 200 (the keep-alive spaces were sent).
type imagesReply struct {
	Model        string `json:"model"`
	Size         string `json:"size"`
	OutputFormat string `json:"output_format"`
	Data         []struct {
		B64JSON string `json:"b64_json"`
		URL     string `json:"url"`
	} `json:"data"`
	Usage *struct {
		InputTokens  int `json:"input_tokens"`
		OutputTokens int `json:"output_tokens"`
	} `json:"usage"`
	apiErrorEnvelope
}

func imagesCmd(ctx context.Context, args []string, getenv func(string) string, stdout io.Writer) error {
	if len(args) == 0 {
		return usageError("images needs a subcommand: generate")
	}
	if isHelp(args[0]) {
		fmt.Fprint(stdout, imagesUsage)
		return nil
	}
	if args[0] != "generate" {
		return usageError(fmt.Sprintf("unknown images subcommand %q", args[0]))
	}
	fs := newFlags("images generate")
	model := fs.String("model", "", "the image model id")
	prompt := fs.String("prompt", "", "what to draw")
	n := fs.Int("n", 1, "how many images (1 to the model's max_images)")
	size := fs.String("size", "", "WxH, one of the model's sizes (the model's default if unset)")
	quality := fs.String("quality", "", "one of the model's qualities")
	format := fs.String("format", "", "png, jpeg or webp, as the model offers (the model's default if unset)")
	respFormat := fs.String("response-format", "", "b64_json or url (the model's default if unset)")
	output := fs.String("output", "", "the file to write (numbered -1, -2, ... with --n above 1)")
	if err := parse(fs, args[1:], stdout); err != nil {
		return err
	}
	switch {
	case fs.NArg() != 0: // flags after it were not parsed
		return usageError(fmt.Sprintf("images generate: unexpected argument %q", fs.Arg(0)))
	case *model == "" || *prompt == "" || *output == "":
		return usageError("images generate needs --model, --prompt and --output")
	case *n < 1:
		return usageError("images generate: --n must be 1 or more")
	case *respFormat != "" && *respFormat != "b64_json" && *respFormat != "url":
		return usageError("images generate: --response-format must be b64_json or url")
	}
	base, key, err := publicAPI(getenv)
	if err != nil {
		return err
	}
	body := map[string]any{"model": *model, "prompt": *prompt}
	if flagSet(fs, "n") {
		body["n"] = *n
	}
	for k, v := range map[string]string{"size": *size, "quality": *quality, "output_format": *format, "response_format": *respFormat} {
		if v != "" {
			body[k] = v
		}
	}
	url := base + "/v1/images/generations"
	resp, err := sendAPI(ctx, &http.Client{Timeout: mediaTimeout}, http.MethodPost, url, key, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var ans imagesReply
	if err := json.NewDecoder(io.LimitReader(resp.Body, maxImagesAnswer)).Decode(&ans); err != nil {
		return fmt.Errorf("POST %s: reading the answer: %w", url, err)
	}
	if ans.Error != nil { // failed after the 200 was sent
		return fmt.Errorf("POST %s: %s", url, ans.Error.Message)
	}
	if len(ans.Data) == 0 {
		return fmt.Errorf("POST %s: the answer has no image", url)
	}
	if ans.Model != "" && ans.Model != *model {
		fmt.Fprintf(stdout, "served by: %s (a fallback of %s)\n", ans.Model, *model)
	}
	for i, d := range ans.Data {
		path := *output
		if *n > 1 || len(ans.Data) > 1 {
			path = numbered(*output, i+1)
		}
		var written int64
		switch {
		case d.B64JSON != "":
			b, err := base64.StdEncoding.DecodeString(d.B64JSON)
			if err != nil {
				return fmt.Errorf("image %d: b64_json: %w", i+1, err)
			}
			written, err = writeAtomic(path, bytes.NewReader(b))
			if err != nil {
				return err
			}
		case d.URL != "":
			written, err = downloadTo(ctx, d.URL, path)
			if err != nil {
				return fmt.Errorf("image %d: %w", i+1, err)
			}
		default:
			return fmt.Errorf("image %d: the answer has neither b64_json nor url", i+1)
		}
		fmt.Fprintf(stdout, "wrote %s: %d bytes, %s\n", path, written, imageKind(path, ans.Size, ans.OutputFormat))
	}
	if ans.Usage != nil {
		fmt.Fprintf(stdout, "usage: %d input tokens, %d output tokens\n", ans.Usage.InputTokens, ans.Usage.OutputTokens)
	}
	if len(ans.Data) < *n {
		fmt.Fprintf(stdout, "the model made %d of the %d images asked for\n", len(ans.Data), *n)
	}
	return nil
}

// numbered returns path with -i before its extension: cat.png, 2 ->
// cat-2.png.
func numbered(path string, i int) string {
	ext := filepath.Ext(path)
	if strings.ContainsAny(ext, `/\`) {
		ext = ""
	}
	return fmt.Sprintf("%s-%d%s", strings.TrimSuffix(path, ext), i, ext)
}

// imageKind describes the image written at path: its size and format as
// decoded, or, for a format the CLI cannot read (webp), as the answer
// gave them.
func imageKind(path, size, format string) string {
	if f, err := os.Open(path); err == nil {
		defer f.Close()
		if c, kind, err := image.DecodeConfig(f); err == nil {
			return fmt.Sprintf("%dx%d %s", c.Width, c.Height, kind)
		}
	}
	return strings.TrimSpace(size + " " + format)
}

// flagSet reports whether the flag name was given.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// speechCmd is `genway speech`. stdin is where text comes from without
// --input or --input-file (nil: none, a terminal); with --output - the
// audio goes to stdout and the report to stderr.
func speechCmd(ctx context.Context, args []string, getenv func(string) string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprint(stdout, speechUsage)
		return nil
	}
	fs := newFlags("speech")
	model := fs.String("model", "", "the speech model id")
	voice := fs.String("voice", "", "one of the model's voices (its default if unset)")
	format := fs.String("format", "", "mp3 (the default), wav, opus, aac, flac or pcm, as the model offers")
	speed := fs.Float64("speed", 1, "0.25 to 4, within the model's range")
	instructions := fs.String("instructions", "", "how to speak, for models that take instructions")
	input := fs.String("input", "", "the text to speak")
	inputFile := fs.String("input-file", "", "a file holding the text to speak")
	output := fs.String("output", "", "the audio file to write, or - for stdout")
	if err := parse(fs, args, stdout); err != nil {
		return err
	}
	switch {
	case fs.NArg() != 0: // flags after it were not parsed
		return usageError(fmt.Sprintf("speech: unexpected argument %q (the text goes in --input)", fs.Arg(0)))
	case *model == "" || *output == "":
		return usageError("speech needs --model and --output")
	case flagSet(fs, "input") && *inputFile != "":
		return usageError("speech takes --input or --input-file, not both")
	}
	text := *input
	switch {
	case *inputFile != "":
		b, err := os.ReadFile(*inputFile)
		if err != nil {
			return fmt.Errorf("speech: %w", err)
		}
		text = string(b)
	case !flagSet(fs, "input"):
		if stdin == nil {
			return usageError("speech needs --input TEXT, --input-file FILE or the text on stdin")
		}
		b, err := io.ReadAll(stdin)
		if err != nil {
			return fmt.Errorf("speech: reading stdin: %w", err)
		}
		text = string(b)
	}
	if strings.TrimSpace(text) == "" {
		return usageError("speech: the text to speak is empty")
	}
	base, key, err := publicAPI(getenv)
	if err != nil {
		return err
	}
	body := map[string]any{"model": *model, "input": text}
	for k, v := range map[string]string{"voice": *voice, "response_format": *format, "instructions": *instructions} {
		if v != "" {
			body[k] = v
		}
	}
	if flagSet(fs, "speed") {
		body["speed"] = *speed
	}
	url := base + "/v1/audio/speech"
	resp, err := sendAPI(ctx, &http.Client{Timeout: mediaTimeout}, http.MethodPost, url, key, body)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	report, name := stdout, *output
	var written int64
	if *output == "-" {
		report, name = stderr, "stdout"
		written, err = io.Copy(stdout, resp.Body)
	} else {
		written, err = writeAtomic(*output, resp.Body)
	}
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return fmt.Errorf("POST %s: the audio was cut short after %d bytes (the vendor failed mid-way); nothing was kept: %w", url, written, err)
		}
		return fmt.Errorf("POST %s: %w", url, err)
	}
	if m := answeredBy(resp.Header.Get(httpapi.AttemptsHeader)); m != "" && m != *model {
		fmt.Fprintf(report, "served by: %s (a fallback of %s)\n", m, *model)
	}
	fmt.Fprintf(report, "wrote %s: %d bytes, %s\n", name, written, resp.Header.Get("Content-Type"))
	return nil
}

// answeredBy returns the model of the last attempt in an
// X-Genway-Attempts header (httpapi.AttemptsHeader, as
// route.FormatAttempts writes it: "m1=503, m2=200": m2), "" for none.
func answeredBy(attempts string) string {
	last := attempts
	if i := strings.LastIndex(attempts, ", "); i >= 0 {
		last = attempts[i+len(", "):]
	}
	m, _, _ := strings.Cut(last, "=")
	return strings.TrimSpace(m)
}
