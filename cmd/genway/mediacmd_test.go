package main

import (
	"bytes"
	"errors"
	"image"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hajimehoshi/go-mp3"

	"github.com/genway/genway/shared/credits"
	"github.com/genway/genway/shared/images"
	"github.com/genway/genway/shared/local/localstore"
	"github.com/genway/genway/shared/media"
	"github.com/genway/genway/shared/providers/synthetic"
)

// TestMediaCmdFlags: mistakes on the command line are usage errors that
// say what is wrong, before any call (no server runs here).
func TestMediaCmdFlags(t *testing.T) {
	env := testEnv(t.TempDir(), map[string]string{"GENWAY_URL": "http://127.0.0.1:1"})
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"images"}, "images needs a subcommand"},
		{[]string{"images", "draw"}, `unknown images subcommand "draw"`},
		{[]string{"images", "generate", "--prompt", "a fox", "--output", "x.png"}, "needs --model, --prompt and --output"},
		{[]string{"images", "generate", "--model", "m", "--prompt", "a fox"}, "needs --model, --prompt and --output"},
		{[]string{"images", "generate", "--model", "m", "--prompt", "a fox", "--output", "x.png", "--n", "0"}, "--n must be 1 or more"},
		{[]string{"images", "generate", "--model", "m", "--prompt", "a fox", "--output", "x.png", "--n", "two"}, "invalid value"},
		{[]string{"images", "generate", "--model", "m", "--prompt", "a fox", "--output", "x.png", "--response-format", "json"}, "b64_json or url"},
		{[]string{"images", "generate", "--model", "m", "--prompt", "a fox", "--output", "x.png", "extra"}, `unexpected argument "extra"`},
		{[]string{"speech", "--input", "hi", "--output", "x.mp3"}, "needs --model and --output"},
		{[]string{"speech", "--model", "m", "--input", "hi"}, "needs --model and --output"},
		{[]string{"speech", "--model", "m", "--input", "hi", "--input-file", "f", "--output", "x.mp3"}, "not both"},
		{[]string{"speech", "--model", "m", "--output", "x.mp3"}, "--input TEXT, --input-file FILE or the text on stdin"},
		{[]string{"speech", "--model", "m", "--input", "  ", "--output", "x.mp3"}, "is empty"},
		{[]string{"speech", "--model", "m", "--input", "hi", "--speed", "fast", "--output", "x.mp3"}, "invalid value"},
		{[]string{"speech", "--model", "m", "hello", "--output", "x.mp3"}, `unexpected argument "hello"`},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			// run passes the test binary's stdin (nil when a terminal);
			// speechCmd is called with none so the case is the same
			// everywhere.
			var err error
			if tt.args[0] == "speech" {
				err = speechCmd(t.Context(), tt.args[1:], env, nil, io.Discard, io.Discard)
			} else {
				err = run(t.Context(), tt.args, env, io.Discard, io.Discard)
			}
			var ue usageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("genway %s = %v; want a usage error saying %q", strings.Join(tt.args, " "), err, tt.want)
			}
		})
	}
	var out bytes.Buffer
	if err := run(t.Context(), []string{"images", "--help"}, env, &out, io.Discard); err != nil || !strings.Contains(out.String(), "cat-1.png, cat-2.png") {
		t.Errorf("images --help = %q; want the numbering of --n above 1 explained", out.String())
	}
}

// TestMediaCmds runs genway images generate and genway speech against a
// genway serve (synthetic-image, synthetic-speech): the files are what
// the models make, a failed call leaves no file (not even a partial one),
// and the account's usage then lists the images and the speech with their
// credits.
func TestMediaCmds(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir, nil)
	env := testEnv(dir, map[string]string{"GENWAY_URL": s.base + "/v1"})

	t.Run("images", func(t *testing.T) {
		tests := []struct {
			name    string
			args    []string // after images generate --model synthetic-image --output DIR/<output>
			output  string
			params  images.Params // what synthetic-image must have drawn
			files   []string      // the files written, in DIR
			wantErr string        // "": success
		}{
			{"one, b64_json by default", []string{"--prompt", "a red fox"}, "fox.png",
				images.Params{Prompt: "a red fox", N: 1, Size: "1024x1024", Format: "png"}, []string{"fox.png"}, ""},
			{"three as links", []string{"--prompt", "a blue whale", "--n", "3", "--size", "256x256", "--response-format", "url"}, "whale.png",
				images.Params{Prompt: "a blue whale", N: 3, Size: "256x256", Format: "png"}, []string{"whale-1.png", "whale-2.png", "whale-3.png"}, ""},
			{"jpeg", []string{"--prompt", "a green owl", "--size", "512x512", "--format", "jpeg", "--response-format", "b64_json"}, "owl.jpg",
				images.Params{Prompt: "a green owl", N: 1, Size: "512x512", Format: "jpeg"}, []string{"owl.jpg"}, ""},
			{"two without an extension", []string{"--prompt", "a cat", "--n", "2", "--size", "256x256"}, "cat",
				images.Params{Prompt: "a cat", N: 2, Size: "256x256", Format: "png"}, []string{"cat-1", "cat-2"}, ""},
			{"refused prompt", []string{"--prompt", "fail:policy a fox"}, "refused.png", images.Params{}, nil, "HTTP 400: "},
			{"size the model lacks", []string{"--prompt", "a fox", "--size", "300x300"}, "small.png", images.Params{}, nil, "size"},
			{"unknown model", []string{"--prompt", "a fox", "--model", "no-such-image-model"}, "none.png", images.Params{}, nil, "HTTP 404: "},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				out := t.TempDir()
				args := append([]string{"images", "generate", "--model", "synthetic-image", "--output", filepath.Join(out, tt.output)}, tt.args...)
				var stdout bytes.Buffer
				err := run(t.Context(), args, env, &stdout, io.Discard)
				if tt.wantErr != "" {
					if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
						t.Fatalf("genway %s = %v; want an error with %q", strings.Join(args, " "), err, tt.wantErr)
					}
					if names := dirNames(t, out); len(names) != 0 {
						t.Errorf("the failed call left %q", names)
					}
					return
				}
				if err != nil {
					t.Fatalf("genway %s = %v", strings.Join(args, " "), err)
				}
				if names := dirNames(t, out); !slices.Equal(names, tt.files) {
					t.Fatalf("wrote %q; want %q", names, tt.files)
				}
				want := syntheticPictures(t, tt.params)
				for i, name := range tt.files {
					b, err := os.ReadFile(filepath.Join(out, name))
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(b, want[i]) {
						t.Errorf("%s: %d bytes; want synthetic-image's %d", name, len(b), len(want[i]))
					}
					c, kind, err := image.DecodeConfig(bytes.NewReader(b))
					if err != nil || kind != tt.params.Format || c.Width != imageDim(t, tt.params.Size, 0) || c.Height != imageDim(t, tt.params.Size, 1) {
						t.Errorf("%s decodes to %dx%d %s, %v; want %s %s", name, c.Width, c.Height, kind, err, tt.params.Size, tt.params.Format)
					}
					line := "wrote " + filepath.Join(out, name) + ": " + strconv.Itoa(len(b)) + " bytes, " + tt.params.Size + " " + tt.params.Format
					if !strings.Contains(stdout.String(), line+"\n") {
						t.Errorf("output %q; want the line %q", stdout.String(), line)
					}
				}
			})
		}
	})

	t.Run("speech", func(t *testing.T) {
		textFile := filepath.Join(t.TempDir(), "text.txt")
		if err := os.WriteFile(textFile, []byte(speechText), 0o600); err != nil {
			t.Fatal(err)
		}
		tests := []struct {
			name    string
			args    []string // after speech --model synthetic-speech --output DIR/<output>
			stdin   string
			output  string // "-": stdout
			voice   string
			format  string
			wantErr string // "": success
		}{
			{"wav from --input", []string{"--input", speechText, "--voice", "coral", "--format", "wav"}, "", "hello.wav", "coral", "wav", ""},
			{"mp3 from --input-file", []string{"--input-file", textFile}, "", "hello.mp3", "alloy", "mp3", ""},
			{"stdin to stdout", []string{"--voice", "sage", "--format", "wav"}, speechText, "-", "sage", "wav", ""},
			{"slower", []string{"--input", speechText, "--speed", "0.5", "--format", "wav"}, "", "slow.wav", "alloy", "wav", ""},
			{"cut short after the first audio", []string{"--input", "fail: " + speechText, "--format", "wav"}, "", "cut.wav", "", "", "cut short"},
			// To stdout the audio has gone out as it came (not held until
			// the end): the first of it is there before the failure.
			{"cut short, to stdout", []string{"--input", "fail: " + speechText, "--format", "wav"}, "", "-", "", "", "cut short"},
			{"refused text", []string{"--input", "fail:policy hello"}, "", "refused.mp3", "", "", "HTTP 400: "},
			{"voice the model lacks", []string{"--input", "hello", "--voice", "darth"}, "", "darth.mp3", "", "", "voice"},
			{"format the model lacks", []string{"--input", "hello", "--format", "flac"}, "", "x.flac", "", "", "does not stream flac"},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				out := t.TempDir()
				path := tt.output
				if path != "-" {
					path = filepath.Join(out, tt.output)
				}
				args := append([]string{"--model", "synthetic-speech", "--output", path}, tt.args...)
				var stdout, stderr bytes.Buffer
				err := speechCmd(t.Context(), args, env, strings.NewReader(tt.stdin), &stdout, &stderr)
				if tt.wantErr != "" {
					if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
						t.Fatalf("genway speech %s = %v; want an error with %q", strings.Join(args, " "), err, tt.wantErr)
					}
					if names := dirNames(t, out); len(names) != 0 {
						t.Errorf("the failed call left %q", names)
					}
					if tt.output == "-" && !bytes.HasPrefix(stdout.Bytes(), []byte("RIFF")) {
						t.Errorf("stdout has %q; want the audio sent before the failure", stdout.Bytes()[:min(stdout.Len(), 12)])
					}
					return
				}
				if err != nil {
					t.Fatalf("genway speech %s = %v", strings.Join(args, " "), err)
				}
				audio, report := stdout.Bytes(), stdout.String()
				if tt.output != "-" {
					if audio, err = os.ReadFile(path); err != nil {
						t.Fatal(err)
					}
					if names := dirNames(t, out); !slices.Equal(names, []string{tt.output}) {
						t.Errorf("wrote %q; want only %s", names, tt.output)
					}
				} else {
					report = stderr.String()
				}
				speed := 1.0
				if i := slices.Index(args, "--speed"); i >= 0 {
					speed = 0.5
				}
				var want bytes.Buffer
				if err := media.WriteSpeech(&want, speechText, synthetic.Seed("speech", tt.voice, ""), speed, tt.format); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(audio, want.Bytes()) {
					t.Fatalf("wrote %d bytes; want synthetic-speech's %d", len(audio), want.Len())
				}
				switch tt.format {
				case "wav":
					if len(audio) < 44 || string(audio[:4]) != "RIFF" || string(audio[8:12]) != "WAVE" {
						t.Errorf("header %q; want RIFF....WAVE", audio[:min(len(audio), 12)])
					}
				case "mp3":
					d, err := mp3.NewDecoder(bytes.NewReader(audio))
					if err != nil {
						t.Fatalf("mp3: %v", err)
					}
					if pcm, err := io.ReadAll(d); err != nil || len(pcm) == 0 {
						t.Errorf("mp3 decodes to %d bytes, %v", len(pcm), err)
					}
				}
				ct := map[string]string{"wav": "audio/wav", "mp3": "audio/mpeg"}[tt.format]
				name := path
				if path == "-" {
					name = "stdout"
				}
				if line := "wrote " + name + ": " + strconv.Itoa(len(audio)) + " bytes, " + ct + "\n"; !strings.Contains(report, line) {
					t.Errorf("report %q; want %q", report, line)
				}
			})
		}
	})

	// A failed call leaves the file that was there as it was.
	t.Run("failure keeps the old file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "keep.wav")
		if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
			t.Fatal(err)
		}
		err := speechCmd(t.Context(), []string{"--model", "synthetic-speech", "--format", "wav", "--input", "fail: " + speechText, "--output", path}, env, nil, io.Discard, io.Discard)
		if b, _ := os.ReadFile(path); err == nil || string(b) != "old" {
			t.Errorf("a cut-short speech = %v and left %q; want an error and the old file", err, b)
		}
	})

	// The usage (read through the admin socket: no GENWAY_URL) lists what succeeded above: 1+3+1+2 images of 1 credit
	// each; 4 speeches of 240 characters (0.24 credits each, at 1 per
	// 1,000 characters). Failures cost nothing and count nowhere.
	var usage bytes.Buffer
	if err := run(t.Context(), []string{"credits", "usage", "--account", "dev"}, testEnv(dir, nil), &usage, io.Discard); err != nil {
		t.Fatalf("credits usage = %v", err)
	}
	got := "\n" + collapse(usage.String()) + "\n"
	for _, want := range []string{" image synthetic-image 0 0 0 4 7\n", " speech synthetic-speech 0 0 0 4 0.96\n", "\ntotal 0 0 0 8 7.96\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("credits usage =\n%s\nwant a line ending %q", usage.String(), want)
		}
	}
}

// dirNames returns the names in dir, sorted (temporary files included).
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}

// imageDim returns the width (i 0) or height (i 1) of a WxH size.
func imageDim(t *testing.T, size string, i int) int {
	t.Helper()
	w, h, ok := strings.Cut(size, "x")
	if !ok {
		t.Fatalf("size %q", size)
	}
	n, err := strconv.Atoi([]string{w, h}[i])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestReservationsCmd: genway credits reservations lists the open
// reservations (credits held by images and speech being made), of every
// account or of one, with the total held; settled ones are not listed.
func TestReservationsCmd(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	db, _, _, _ := embeddedPaths(dir)
	st, err := localstore.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"acme", "beta"} {
		if _, err := st.Grant(ctx, a, 50*credits.Credit, 1); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now().Unix()
	for _, r := range []struct {
		id, account, typ, model string
		amount                  credits.Amount
		age                     int64
		settled                 bool
	}{
		{"img_open", "acme", "image", "synthetic-image", 3 * credits.Credit, 90, false},
		{"sp_open", "beta", "speech", "synthetic-speech", 2_012, 10, false}, // 0.002012
		{"img_done", "acme", "image", "synthetic-image", 4 * credits.Credit, 50, true},
	} {
		e := credits.Entry{ID: credits.ReservationID(r.id), Account: r.account, Kind: credits.Reservation, Amount: r.amount, JobType: r.typ, Model: r.model, At: now - r.age}
		if err := st.Reserve(ctx, e); err != nil {
			t.Fatal(err)
		}
		if r.settled {
			if _, err := credits.ReleaseReservation(ctx, st, e, now); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	env := testEnv(dir, nil)
	tests := []struct {
		args    []string
		want    []string // whitespace-collapsed lines, each a prefix of one
		notWant string
		usage   bool
	}{
		{nil, []string{"AT AGE ACCOUNT TYPE MODEL HELD ID", "acme image synthetic-image 3 reserve:img_open", "beta speech synthetic-speech 0.002012 reserve:sp_open", "total 3.002012 2 open"}, "img_done", false},
		{[]string{"--account", "acme"}, []string{"acme image synthetic-image 3 reserve:img_open", "total 3 1 open"}, "sp_open", false},
		{[]string{"--account", "nobody"}, nil, "", false},
		{[]string{"acme"}, nil, "", true},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			var out bytes.Buffer
			err := run(ctx, append([]string{"credits", "reservations"}, tt.args...), env, &out, io.Discard)
			var ue usageError
			switch {
			case tt.usage:
				if !errors.As(err, &ue) {
					t.Fatalf("= %v; want a usage error", err)
				}
				return
			case tt.want == nil:
				if err == nil || !strings.Contains(err.Error(), "account") {
					t.Fatalf("= %v; want an error about the account", err)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			got := collapse(out.String())
			for _, w := range tt.want {
				found := false
				for _, l := range strings.Split(got, "\n") {
					// AT and AGE come first on a reservation's line.
					if f := strings.Fields(l); strings.HasPrefix(l, w) || (len(f) > 2 && strings.HasPrefix(strings.Join(f[2:], " "), w)) {
						found = true
					}
				}
				if !found {
					t.Errorf("output =\n%s\nwant a line with %q", out.String(), w)
				}
			}
			if tt.notWant != "" && strings.Contains(got, tt.notWant) {
				t.Errorf("output =\n%s\nlists %s, which is settled or another account's", out.String(), tt.notWant)
			}
		})
	}
}

// TestImagesCmdAnswers: answers genway serve's synthetic model does not
// give, from a fake of the API's wire: an error after the keep-alive
// spaces (the 200 already sent), an error that is not the envelope, an
// answer without images. Each is an error with the API's words, and no
// file.
func TestImagesCmdAnswers(t *testing.T) {
	tests := []struct {
		name    string
		status  int
		body    string
		wantErr string
	}{
		{"error after keep-alive", 200, "   \n  " + `{"error":{"message":"The openai provider timed out.","type":"server_error","code":"upstream_timeout"}}`, "The openai provider timed out."},
		{"not the envelope", 502, "Bad Gateway", "HTTP 502: Bad Gateway"},
		{"envelope", 429, `{"error":{"message":"Rate limit reached.","code":"rate_limited"}}`, "HTTP 429: Rate limit reached."},
		{"no image", 200, `{"created":1,"data":[]}`, "no image"},
		{"cut JSON", 200, `{"created":1,"data":[{"b64_json":"iVBO`, "reading the answer"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path != "/v1/images/generations" || r.Header.Get("Authorization") != "Bearer "+testKey {
					http.Error(w, "wrong request", 400)
					return
				}
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.body)
			}))
			defer srv.Close()
			out := t.TempDir()
			env := testEnv(t.TempDir(), map[string]string{"GENWAY_URL": srv.URL})
			err := run(t.Context(), []string{"images", "generate", "--model", "gpt-image-1", "--prompt", "a fox", "--output", filepath.Join(out, "fox.png")}, env, io.Discard, io.Discard)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("= %v; want an error with %q", err, tt.wantErr)
			}
			if names := dirNames(t, out); len(names) != 0 {
				t.Errorf("left %q", names)
			}
		})
	}
}
