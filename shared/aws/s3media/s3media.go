// Package s3media stores job outputs in a private S3 bucket (jobs.Media):
// Put uploads with server-side encryption, URL presigns a GET at read time.
// Presigned URLs are never stored: they die with the credentials that
// signed them (a Lambda role's session), so each read makes a fresh one.
package s3media

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/genway/genway/shared/jobs"
)

// ExpiryDays is how long CreateBucket's lifecycle rule keeps outputs.
const ExpiryDays = 30

// MaxURLTTL is the longest a SigV4 presigned URL can work (7 days).
const MaxURLTTL = 7 * 24 * time.Hour

// Media is a jobs.Media on one S3 bucket. Safe for concurrent use.
type Media struct {
	client  *s3.Client
	presign *s3.PresignClient
	bucket  string
}

var (
	_ jobs.Media        = (*Media)(nil)
	_ jobs.MediaDeleter = (*Media)(nil)
)

// New returns the Media on bucket. presign may be nil: one is made from
// client.
func New(client *s3.Client, presign *s3.PresignClient, bucket string) *Media {
	if presign == nil {
		presign = s3.NewPresignClient(client)
	}
	return &Media{client: client, presign: presign, bucket: bucket}
}

// Open returns the Media on bucket with a client of cfg (NewClient).
func Open(cfg aws.Config, bucket string) *Media {
	return New(NewClient(cfg), nil, bucket)
}

// NewClient returns an S3 client for cfg. With a custom endpoint
// (cfg.BaseEndpoint, e.g. AWS_ENDPOINT_URL pointing at moto or MinIO) it
// addresses buckets by path, since "<bucket>.127.0.0.1" does not resolve.
func NewClient(cfg aws.Config) *s3.Client {
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		if cfg.BaseEndpoint != nil {
			o.UsePathStyle = true
		}
	})
}

// PartSize is the part size of a multipart upload, and the largest body
// Put sends in one PutObject when it does not know the size in advance.
const PartSize = 8 << 20

// Put implements jobs.Media, with SSE-S3 (AES256), contentType if it is
// an allowed media type (jobs.ServedType; else application/octet-stream)
// and the Content-Disposition a file link serves (jobs.FileDisposition:
// inline for media), so that a presigned GET answers both. (S3 cannot
// send jobs.FileHeaders; its links are on the bucket's origin, not the
// console's.) A body
// of known size up to PartSize, or one that can seek, is one PutObject;
// any other body (a vendor's download, size unknown or large) is streamed
// as a multipart upload of PartSize parts, so at most one part is held in
// memory. A failed multipart upload is aborted (and the bucket's lifecycle
// rule removes what an abort misses).
func (m *Media) Put(ctx context.Context, key, contentType string, r io.Reader, size int64) error {
	if body, ok := r.(io.ReadSeeker); ok && size >= 0 {
		return m.putObject(ctx, key, contentType, body, size)
	}
	first := make([]byte, PartSize+1)
	n, err := io.ReadFull(r, first)
	switch {
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		if size >= 0 && int64(n) != size {
			return fmt.Errorf("put %s: got %d bytes, want %d", key, n, size)
		}
		return m.putObject(ctx, key, contentType, bytes.NewReader(first[:n]), int64(n))
	case err != nil:
		return fmt.Errorf("put %s: read: %w", key, err)
	}
	return m.putMultipart(ctx, key, contentType, first[:PartSize], io.MultiReader(bytes.NewReader(first[PartSize:n]), r), size)
}

func (m *Media) putObject(ctx context.Context, key, contentType string, body io.ReadSeeker, size int64) error {
	ct := jobs.ServedType(contentType)
	_, err := m.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:               aws.String(m.bucket),
		Key:                  aws.String(key),
		Body:                 body,
		ContentLength:        aws.Int64(size),
		ContentType:          aws.String(ct),
		ContentDisposition:   aws.String(jobs.FileDisposition(key, ct)),
		ServerSideEncryption: types.ServerSideEncryptionAes256,
	})
	if err != nil {
		return fmt.Errorf("put %s: %w", key, err)
	}
	return nil
}

// putMultipart uploads first, then the rest of r, in PartSize parts.
func (m *Media) putMultipart(ctx context.Context, key, contentType string, first []byte, rest io.Reader, size int64) (err error) {
	ct := jobs.ServedType(contentType)
	up, err := m.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
		Bucket: aws.String(m.bucket), Key: aws.String(key), ContentType: aws.String(ct),
		ContentDisposition: aws.String(jobs.FileDisposition(key, ct)), ServerSideEncryption: types.ServerSideEncryptionAes256,
	})
	if err != nil {
		return fmt.Errorf("put %s: start upload: %w", key, err)
	}
	defer func() {
		if err != nil {
			m.client.AbortMultipartUpload(context.WithoutCancel(ctx), &s3.AbortMultipartUploadInput{
				Bucket: aws.String(m.bucket), Key: aws.String(key), UploadId: up.UploadId,
			})
		}
	}()
	var parts []types.CompletedPart
	total := int64(0)
	part := first
	buf := make([]byte, PartSize)
	for num := int32(1); ; num++ {
		out, perr := m.client.UploadPart(ctx, &s3.UploadPartInput{
			Bucket: aws.String(m.bucket), Key: aws.String(key), UploadId: up.UploadId,
			PartNumber: aws.Int32(num), Body: bytes.NewReader(part), ContentLength: aws.Int64(int64(len(part))),
		})
		if perr != nil {
			return fmt.Errorf("put %s: part %d: %w", key, num, perr)
		}
		parts = append(parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(num)})
		total += int64(len(part))
		n, rerr := io.ReadFull(rest, buf)
		if rerr != nil && rerr != io.EOF && rerr != io.ErrUnexpectedEOF {
			return fmt.Errorf("put %s: read: %w", key, rerr)
		}
		if n == 0 {
			break
		}
		part = buf[:n]
	}
	if size >= 0 && total != size {
		return fmt.Errorf("put %s: got %d bytes, want %d", key, total, size)
	}
	if _, err := m.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
		Bucket: aws.String(m.bucket), Key: aws.String(key), UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
	}); err != nil {
		return fmt.Errorf("put %s: complete upload: %w", key, err)
	}
	return nil
}

// URL implements jobs.Media: a presigned GET of key that works for ttl
// (cut to MaxURLTTL, and to the signing credentials' own expiry). It makes
// no request; it does not check that key exists.
func (m *Media) URL(ctx context.Context, key string, ttl time.Duration) (string, error) {
	if ttl <= 0 {
		return "", errors.New("presign: ttl must be positive")
	}
	ttl = min(ttl, MaxURLTTL)
	req, err := m.presign.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(m.bucket), Key: aws.String(key)},
		s3.WithPresignExpires(ttl))
	if err != nil {
		return "", fmt.Errorf("presign %s: %w", key, err)
	}
	return req.URL, nil
}

// Delete implements jobs.MediaDeleter: a DeleteObject of key (S3 answers
// success for a key that does not exist). The bucket is not versioned
// (CreateBucket, the SAM template), so the bytes are gone.
func (m *Media) Delete(ctx context.Context, key string) error {
	if _, err := m.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(m.bucket), Key: aws.String(key)}); err != nil {
		return fmt.Errorf("delete %s: %w", key, err)
	}
	return nil
}

// CreateBucket creates bucket in the client's region if it does not exist,
// and makes it private (all public access blocked), encrypted by default
// (SSE-S3) and expiring objects after ExpiryDays. It is idempotent. It is
// for `genway aws init` and tests; deployments use the SAM template.
func CreateBucket(ctx context.Context, client *s3.Client, bucket string) error {
	in := &s3.CreateBucketInput{Bucket: aws.String(bucket)}
	if r := client.Options().Region; r != "" && r != "us-east-1" { // us-east-1 refuses a location constraint
		in.CreateBucketConfiguration = &types.CreateBucketConfiguration{LocationConstraint: types.BucketLocationConstraint(r)}
	}
	_, err := client.CreateBucket(ctx, in)
	var owned *types.BucketAlreadyOwnedByYou
	if err != nil && !errors.As(err, &owned) {
		return fmt.Errorf("create bucket %s: %w", bucket, err)
	}
	if _, err := client.PutPublicAccessBlock(ctx, &s3.PutPublicAccessBlockInput{
		Bucket: aws.String(bucket),
		PublicAccessBlockConfiguration: &types.PublicAccessBlockConfiguration{
			BlockPublicAcls: aws.Bool(true), BlockPublicPolicy: aws.Bool(true),
			IgnorePublicAcls: aws.Bool(true), RestrictPublicBuckets: aws.Bool(true),
		},
	}); err != nil {
		return fmt.Errorf("block public access to %s: %w", bucket, err)
	}
	if _, err := client.PutBucketEncryption(ctx, &s3.PutBucketEncryptionInput{
		Bucket: aws.String(bucket),
		ServerSideEncryptionConfiguration: &types.ServerSideEncryptionConfiguration{Rules: []types.ServerSideEncryptionRule{{
			ApplyServerSideEncryptionByDefault: &types.ServerSideEncryptionByDefault{SSEAlgorithm: types.ServerSideEncryptionAes256},
		}}},
	}); err != nil {
		return fmt.Errorf("encrypt bucket %s: %w", bucket, err)
	}
	if _, err := client.PutBucketLifecycleConfiguration(ctx, &s3.PutBucketLifecycleConfigurationInput{
		Bucket: aws.String(bucket),
		LifecycleConfiguration: &types.BucketLifecycleConfiguration{Rules: []types.LifecycleRule{{
			ID:                             aws.String("expire-outputs"),
			Status:                         types.ExpirationStatusEnabled,
			Filter:                         &types.LifecycleRuleFilter{Prefix: aws.String("")},
			Expiration:                     &types.LifecycleExpiration{Days: aws.Int32(ExpiryDays)},
			AbortIncompleteMultipartUpload: &types.AbortIncompleteMultipartUpload{DaysAfterInitiation: aws.Int32(1)},
		}}},
	}); err != nil {
		return fmt.Errorf("set lifecycle of bucket %s: %w", bucket, err)
	}
	return nil
}
