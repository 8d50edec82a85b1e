package gemini

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"os"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
)

func TestPayloadFilter(t *testing.T) {
	video := []byte("\x00\x01 the video bytes, with every value: \xff\xfe\x80/+=")
	b64 := base64.StdEncoding.EncodeToString(video)
	tests := []struct {
		name    string
		in      string
		want    string // the JSON passed on
		sink    []byte // what the sink gets
		wantErr error  // errors.Is target; nil for none
	}{
		{"operation", `{"name":"n","done":true,"response":{"videos":[{"bytesBase64Encoded":"` + b64 + `","mimeType":"video/mp4"}]}}`,
			`{"name":"n","done":true,"response":{"videos":[{"bytesBase64Encoded":"","mimeType":"video/mp4"}]}}`, video, nil},
		{"pretty, escaped slashes", "{\n  \"bytesBase64Encoded\" :\n \"" + strings.ReplaceAll(b64, "/", `\/`) + "\",\n  \"k\": 1\n}",
			"{\n  \"bytesBase64Encoded\" :\n \"\",\n  \"k\": 1\n}", video, nil},
		{"unpadded", `{"bytesBase64Encoded":"` + strings.TrimRight(b64, "=") + `"}`, `{"bytesBase64Encoded":""}`, video, nil},
		{"the key as a value is kept", `{"a":"bytesBase64Encoded","b":["bytesBase64Encoded","x"]}`, `{"a":"bytesBase64Encoded","b":["bytesBase64Encoded","x"]}`, nil, nil},
		{"a longer or escaped name is kept", `{"bytesBase64Encodedx":"QQ==","bytes\u0042ase64Encoded":"QQ=="}`, `{"bytesBase64Encodedx":"QQ==","bytes\u0042ase64Encoded":"QQ=="}`, nil, nil},
		{"null value", `{"bytesBase64Encoded":null,"x":"y"}`, `{"bytesBase64Encoded":null,"x":"y"}`, nil, nil},
		{"escaped quote in another string", `{"m":"say \"bytesBase64Encoded\":","bytesBase64Encoded":"QUJD"}`, `{"m":"say \"bytesBase64Encoded\":","bytesBase64Encoded":""}`, []byte("ABC"), nil},
		{"second video dropped", `{"v":[{"bytesBase64Encoded":"QUJD"},{"bytesBase64Encoded":"REVG"}]}`, `{"v":[{"bytesBase64Encoded":""},{"bytesBase64Encoded":""}]}`, []byte("ABC"), nil},
		{"not base64", `{"bytesBase64Encoded":"QU*D"}`, "", nil, &payloadError{}},
		{"an escape base64 never has", `{"bytesBase64Encoded":"QU\nJD"}`, "", nil, &payloadError{}},
		{"too large", `{"bytesBase64Encoded":"` + base64.StdEncoding.EncodeToString(make([]byte, 65)) + `"}`, "", nil, errPayloadTooLarge},
		{"cut in the payload", `{"bytesBase64Encoded":"QUJD`, "", nil, io.ErrUnexpectedEOF},
	}
	for _, tt := range tests {
		for _, oneByte := range []bool{false, true} {
			t.Run(tt.name, func(t *testing.T) {
				var r io.Reader = strings.NewReader(tt.in)
				if oneByte {
					r = iotest.OneByteReader(r)
				}
				var sink bytes.Buffer
				f := newPayloadFilter(r, "bytesBase64Encoded", &sink, 64)
				out, err := io.ReadAll(iotest.HalfReader(f))
				if tt.wantErr != nil {
					var pe *payloadError
					if _, isPayload := tt.wantErr.(*payloadError); isPayload && !errors.As(err, &pe) || !isPayload && !errors.Is(err, tt.wantErr) {
						t.Fatalf("ReadAll = %q, %v; want %v", out, err, tt.wantErr)
					}
					return
				}
				if err != nil || string(out) != tt.want {
					t.Fatalf("ReadAll = %q, %v; want %q", out, err, tt.want)
				}
				if !bytes.Equal(sink.Bytes(), tt.sink) || f.Written() != int64(len(tt.sink)) {
					t.Errorf("sink = %q (Written %d); want %q", sink.Bytes(), f.Written(), tt.sink)
				}
			})
		}
	}
}

// FuzzPayloadFilter: whatever the payload and whatever surrounds it, the
// JSON passed on decodes to the document with the payload emptied, and
// the sink holds the payload; any input at all ends without a panic.
func FuzzPayloadFilter(f *testing.F) {
	f.Add([]byte("mp4"), "video/mp4", true, 3)
	f.Add([]byte{}, "", false, 1)
	f.Add([]byte("\x00\xff\"\\"), "a \"quoted\" \\ value", true, 7)
	f.Fuzz(func(t *testing.T, payload []byte, other string, indent bool, chunk int) {
		doc := map[string]any{"name": other, "response": map[string]any{"videos": []any{map[string]any{"bytesBase64Encoded": payload, "mimeType": other}}}}
		var in []byte
		if indent {
			in, _ = json.MarshalIndent(doc, "", " ")
		} else {
			in, _ = json.Marshal(doc)
		}
		var sink bytes.Buffer
		filt := newPayloadFilter(iotest.OneByteReader(bytes.NewReader(in)), "bytesBase64Encoded", &sink, 1<<20)
		out, err := io.ReadAll(filt)
		if err != nil {
			t.Fatalf("ReadAll(%q) = %v", in, err)
		}
		var got, want any
		doc["response"].(map[string]any)["videos"].([]any)[0].(map[string]any)["bytesBase64Encoded"] = ""
		wb, _ := json.Marshal(doc)
		if json.Unmarshal(out, &got) != nil || json.Unmarshal(wb, &want) != nil {
			t.Fatalf("passed on %q: not JSON", out)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("passed on %s; want %s", out, wb)
		}
		if !bytes.Equal(sink.Bytes(), payload) {
			t.Errorf("sink = %q; want %q", sink.Bytes(), payload)
		}
		// Any bytes: no panic, and an end.
		raw := append([]byte(other), in[:len(in)*max(chunk, 0)%(len(in)+1)]...)
		io.ReadAll(newPayloadFilter(bytes.NewReader(raw), "bytesBase64Encoded", io.Discard, 1<<20))
	})
}

// TestSpool: the file is gone from its directory from the first write
// (unlinked) and stays readable until Close.
func TestSpool(t *testing.T) {
	dir := t.TempDir()
	sp := &spool{dir: dir}
	if _, err := sp.Write([]byte("video")); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 && sp.unlinked {
		t.Errorf("files in the spool dir after an unlink: %v", left)
	}
	if err := sp.rewind(); err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(sp); string(b) != "video" {
		t.Errorf("read back %q; want video", b)
	}
	if err := sp.Close(); err != nil {
		t.Fatal(err)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Errorf("files left after Close: %v", left)
	}
	if err := sp.Close(); err != nil {
		t.Errorf("a second Close = %v", err)
	}
}
