package s3media

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/genway/genway/shared/aws/mototest"
)

func TestMedia(t *testing.T) {
	endpoint := mototest.Start(t)
	client := NewClient(mototest.Config(endpoint))
	ctx := context.Background()
	for range 2 { // idempotent
		if err := CreateBucket(ctx, client, "media"); err != nil {
			t.Fatalf("CreateBucket = %v", err)
		}
	}

	t.Run("bucket is private, encrypted, expiring", func(t *testing.T) {
		pab, err := client.GetPublicAccessBlock(ctx, &s3.GetPublicAccessBlockInput{Bucket: aws.String("media")})
		if err != nil || !aws.ToBool(pab.PublicAccessBlockConfiguration.BlockPublicAcls) || !aws.ToBool(pab.PublicAccessBlockConfiguration.RestrictPublicBuckets) {
			t.Errorf("GetPublicAccessBlock = %+v, %v; want all blocked", pab, err)
		}
		enc, err := client.GetBucketEncryption(ctx, &s3.GetBucketEncryptionInput{Bucket: aws.String("media")})
		if err != nil || len(enc.ServerSideEncryptionConfiguration.Rules) != 1 ||
			enc.ServerSideEncryptionConfiguration.Rules[0].ApplyServerSideEncryptionByDefault.SSEAlgorithm != types.ServerSideEncryptionAes256 {
			t.Errorf("GetBucketEncryption = %+v, %v; want AES256", enc, err)
		}
		lc, err := client.GetBucketLifecycleConfiguration(ctx, &s3.GetBucketLifecycleConfigurationInput{Bucket: aws.String("media")})
		if err != nil || len(lc.Rules) != 1 || aws.ToInt32(lc.Rules[0].Expiration.Days) != ExpiryDays {
			t.Errorf("GetBucketLifecycleConfiguration = %+v, %v; want one %d-day expiry", lc, err, ExpiryDays)
		}
	})

	m := New(client, nil, "media")
	t.Run("streamed uploads of unknown or large size", func(t *testing.T) {
		big := bytes.Repeat([]byte("0123456789abcdef"), (2*PartSize+PartSize/2)/16) // 2.5 parts
		for _, tt := range []struct {
			name string
			data []byte
			size int64
		}{
			{"small, size unknown", []byte("ID3 tiny"), -1},
			{"exactly one part, size unknown", big[:PartSize], -1},
			{"multipart, size unknown", big, -1},
			{"multipart, size known", big, int64(len(big))},
		} {
			key := "jobs/stream-" + strings.ReplaceAll(tt.name, " ", "-")
			if err := m.Put(ctx, key, "video/mp4", io.MultiReader(bytes.NewReader(tt.data)), tt.size); err != nil {
				t.Fatalf("%s: Put = %v", tt.name, err)
			}
			out, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("media"), Key: aws.String(key)})
			if err != nil {
				t.Fatalf("%s: GetObject = %v", tt.name, err)
			}
			got, _ := io.ReadAll(out.Body)
			out.Body.Close()
			if !bytes.Equal(got, tt.data) || aws.ToString(out.ContentType) != "video/mp4" {
				t.Errorf("%s: stored %d bytes (%s); want the %d bytes sent, video/mp4", tt.name, len(got), aws.ToString(out.ContentType), len(tt.data))
			}
		}
		// A wrong size or a failing body stores nothing.
		if err := m.Put(ctx, "jobs/short", "video/mp4", io.MultiReader(bytes.NewReader(big)), int64(len(big))+1); err == nil {
			t.Error("Put with a wrong size = nil; want an error")
		}
		failing := io.MultiReader(bytes.NewReader(big[:PartSize+10]), iotestErr{})
		if err := m.Put(ctx, "jobs/broken", "video/mp4", failing, -1); err == nil {
			t.Error("Put of a failing body = nil; want an error")
		}
		for _, key := range []string{"jobs/short", "jobs/broken"} {
			if _, err := client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("media"), Key: aws.String(key)}); err == nil {
				t.Errorf("%s exists after a failed Put", key)
			}
		}
	})

	// Each object is stored with an allowed media type (or as a download
	// of application/octet-stream) and the Content-Disposition the local
	// links send, which a presigned GET answers.
	tests := []struct {
		name, key, ct    string
		wantCT, wantDisp string
		data             []byte
	}{
		{"seekable", "jobs/job_1.mp3", "audio/mpeg", "audio/mpeg", `inline; filename="job_1.mp3"`, []byte("ID3\x04fake mp3 bytes")},
		{"stream", "jobs/job_2.wav", "audio/x-wav", "audio/wav", `inline; filename="job_2.wav"`, bytes.Repeat([]byte("RIFF"), 5000)},
		{"html", "jobs/job_3.bin", "text/html; charset=utf-8", "application/octet-stream", `attachment; filename="job_3.bin"`, []byte("<script>alert(1)</script>")},
		{"multipart svg", "images/img_4-0.svg", "image/svg+xml", "application/octet-stream", `attachment; filename="img_4-0.svg"`,
			bytes.Repeat([]byte("<svg/>"), PartSize/6+10)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r io.Reader = bytes.NewReader(tt.data)
			if tt.name != "seekable" {
				r = io.MultiReader(bytes.NewReader(tt.data)) // not a Seeker
			}
			if err := m.Put(ctx, tt.key, tt.ct, r, int64(len(tt.data))); err != nil {
				t.Fatalf("Put(%q) = %v", tt.key, err)
			}
			head, err := client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("media"), Key: aws.String(tt.key)})
			if err != nil || head.ServerSideEncryption != types.ServerSideEncryptionAes256 || aws.ToString(head.ContentType) != tt.wantCT ||
				aws.ToString(head.ContentDisposition) != tt.wantDisp {
				t.Errorf("HeadObject(%q) = %+v, %v; want AES256, %s, %s", tt.key, head, err, tt.wantCT, tt.wantDisp)
			}
			link, err := m.URL(ctx, tt.key, 10*time.Minute)
			if err != nil {
				t.Fatalf("URL(%q) = %v", tt.key, err)
			}
			u, err := url.Parse(link)
			if err != nil || !u.IsAbs() || u.Query().Get("X-Amz-Expires") != "600" || u.Query().Get("X-Amz-Signature") == "" {
				t.Errorf("URL(%q) = %q; want an absolute presigned URL expiring in 600 s", tt.key, link)
			}
			// moto does not check presigned signatures; this shows the link
			// addresses the object, not that the signature is valid.
			resp, err := http.Get(link)
			if err != nil {
				t.Fatalf("GET %s: %v", link, err)
			}
			defer resp.Body.Close()
			got, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK || !bytes.Equal(got, tt.data) || resp.Header.Get("Content-Type") != tt.wantCT ||
				resp.Header.Get("Content-Disposition") != tt.wantDisp {
				t.Errorf("GET %s = %d %q %q, %d bytes; want 200 %s %s, %d bytes", link, resp.StatusCode, resp.Header.Get("Content-Type"),
					resp.Header.Get("Content-Disposition"), len(got), tt.wantCT, tt.wantDisp, len(tt.data))
			}
		})
	}

	t.Run("short stream", func(t *testing.T) {
		if err := m.Put(ctx, "short", "audio/mpeg", io.MultiReader(strings.NewReader("abc")), 10); err == nil {
			t.Errorf("Put(3 bytes, size 10) = nil; want an error")
		}
	})

	t.Run("delete", func(t *testing.T) {
		const key = "videos/job_video_del.mp4"
		if err := m.Put(ctx, key, "video/mp4", bytes.NewReader([]byte("....ftypisom")), 12); err != nil {
			t.Fatalf("Put(%q) = %v", key, err)
		}
		for i := range 2 { // a key already gone is no error
			if err := m.Delete(ctx, key); err != nil {
				t.Fatalf("Delete(%q) #%d = %v; want nil", key, i+1, err)
			}
		}
		if _, err := client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("media"), Key: aws.String(key)}); err == nil {
			t.Errorf("HeadObject(%q) after Delete = nil; want not found", key)
		}
		link, err := m.URL(ctx, key, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.Get(link)
		if err != nil {
			t.Fatalf("GET %s: %v", link, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET of a deleted object's link = %d; want 404", resp.StatusCode)
		}
	})

	t.Run("bad ttl", func(t *testing.T) {
		if u, err := m.URL(ctx, "jobs/job_1.mp3", 0); err == nil {
			t.Errorf("URL(ttl 0) = %q, nil; want an error", u)
		}
	})
}

// iotestErr is a reader that fails.
type iotestErr struct{}

func (iotestErr) Read([]byte) (int, error) { return 0, io.ErrClosedPipe }
