package jobs

import (
	"errors"
	"fmt"
	"mime"
	"path"
	"strings"

	"github.com/genway/genway/shared/catalog"
)

// mediaTypes returns the media types Genway stores and serves for a kind
// of output: a job type (music, sfx, video) or catalog.TypeImage. A
// vendor's file of any other type (HTML, SVG, a script, XML, a type the
// vendor made up) fails its job or its image request (upstream_error, no
// charge) and is never stored: the file links of genway serve are on the
// console's own origin, where an HTML or SVG file would run as the
// console. Speech is not stored; its answer's type follows the requested
// format (speech.ContentType). (Switches, not maps: a map would be built
// at start-up in every program that links jobs.)
func mediaTypes(kind string) []string {
	switch kind {
	case TypeMusic, TypeSFX:
		return audioTypes
	case TypeVideo:
		return videoTypes
	case catalog.TypeImage:
		return imageTypes
	}
	return nil
}

var (
	audioTypes = []string{"audio/mpeg", "audio/wav", "audio/flac", "audio/ogg", "audio/mp4", "audio/aac"}
	videoTypes = []string{"video/mp4", "video/webm", "video/quicktime"}
	imageTypes = []string{"image/png", "image/jpeg", "image/webp"}
)

// mediaKinds are the kinds of output mediaTypes knows.
var mediaKinds = [...]string{TypeMusic, TypeSFX, TypeVideo, catalog.TypeImage}

// mediaAlias returns the allowed type that another name vendors give it
// stands for (audio/x-wav is audio/wav), or mt itself.
func mediaAlias(mt string) string {
	switch mt {
	case "audio/mp3":
		return "audio/mpeg"
	case "audio/x-wav", "audio/wave", "audio/vnd.wave":
		return "audio/wav"
	case "audio/x-flac":
		return "audio/flac"
	case "audio/x-m4a":
		return "audio/mp4"
	case "image/jpg":
		return "image/jpeg"
	}
	return mt
}

// MediaType returns the media type an output of kind (a job type, or
// catalog.TypeImage) is stored and served with for a vendor's
// contentType: its media type without parameters, lower case, an alias
// named as the allowed type it stands for (audio/x-wav is audio/wav); and
// whether outputs of kind may have it at all. Anything else (text/html,
// image/svg+xml, application/octet-stream, an unparsable value, an
// unknown kind) is false.
func MediaType(kind, contentType string) (string, bool) {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return "", false
	}
	mt = mediaAlias(mt)
	for _, t := range mediaTypes(kind) {
		if t == mt {
			return mt, true
		}
	}
	return mt, false
}

// ErrMediaType is the cause of every MediaTypeError.
var ErrMediaType = errors.New("output media type not allowed")

// MediaTypeError is the failure of an output of kind whose vendor gave it
// contentType, which MediaType refuses: a *ProviderError (upstream_error)
// wrapping ErrMediaType, whose message names the type (as parsed: no
// parameters, nothing else the vendor wrote) and says nothing was
// charged; it is safe to show the client.
func MediaTypeError(kind, contentType string) *ProviderError {
	what := "of an unreadable type"
	if mt, _, err := mime.ParseMediaType(contentType); err == nil {
		what = "of type " + mt
	}
	return &ProviderError{Code: CodeUpstream,
		Message: fmt.Sprintf("The vendor's file is %s, which is not a %s file this service serves; no credits were charged.", what, kind),
		Err:     fmt.Errorf("%w: %q", ErrMediaType, contentType)}
}

// ServedType returns the Content-Type a file link serves a stored file
// with: its stored type if some kind of output may have it (MediaType),
// else application/octet-stream (a file stored before the allow-list, or
// with no type), which FileDisposition then makes a download.
func ServedType(contentType string) string {
	for _, kind := range mediaKinds {
		if mt, ok := MediaType(kind, contentType); ok {
			return mt
		}
	}
	return "application/octet-stream"
}

// FileHeaders are the headers a file link serves every stored file with,
// besides its type and disposition: the browser may not guess another
// type than the one sent, and a file opened on its own is a sandboxed
// document (no script, no form, no plugin) that loads nothing but itself
// (so that even a file served as the wrong type runs no script and reaches
// no other resource). The sandbox keeps the file's origin
// (allow-same-origin, harmless without scripts) and media-src, img-src
// 'self' and inline styles are allowed because the browser's own media
// and image documents need them: without them Chromium refuses to play
// a video opened from its link (its media document loads the file as an
// opaque origin, or under default-src 'none'). S3 cannot send these
// headers; its links are on the bucket's own origin, not the console's.
var FileHeaders = map[string]string{
	"X-Content-Type-Options":  "nosniff",
	"Content-Security-Policy": FileCSP,
}

// FileCSP is the Content-Security-Policy of FileHeaders.
const FileCSP = "sandbox allow-same-origin; default-src 'none'; media-src 'self'; img-src 'self'; style-src 'unsafe-inline'"

// FileDisposition returns the Content-Disposition of the stored file key
// served as servedType (ServedType): inline for media (browsers play or
// show it in place), attachment for anything else, with the key's last
// element as the file name, every byte but letters, digits, '.', '-' and
// '_' replaced by '_'.
func FileDisposition(key, servedType string) string {
	name := []byte(path.Base(key))
	for i, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			name[i] = '_'
		}
	}
	kind := "inline"
	if servedType == "application/octet-stream" || !strings.Contains(servedType, "/") {
		kind = "attachment"
	}
	return kind + `; filename="` + string(name) + `"`
}

// Ext returns the file extension (without dot) for a media type: mp3, wav,
// mp4, ...; "bin" for an unknown one.
func Ext(contentType string) string {
	switch contentType {
	case "audio/mpeg", "audio/mp3":
		return "mp3"
	case "audio/wav", "audio/x-wav", "audio/wave", "audio/vnd.wave":
		return "wav"
	case "audio/flac", "audio/x-flac":
		return "flac"
	case "audio/ogg":
		return "ogg"
	case "audio/mp4":
		return "m4a"
	case "audio/aac":
		return "aac"
	case "video/mp4":
		return "mp4"
	case "video/webm":
		return "webm"
	case "video/quicktime":
		return "mov"
	case "image/png":
		return "png"
	case "image/jpeg":
		return "jpg"
	case "image/webp":
		return "webp"
	}
	return "bin"
}
