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

var _ jobs.Media = (*Media)(nil)

// New returns the Media on bucket. presign may be nil: one is made from
// client.
func New(client *s3.Client, presign *s3.PresignClient, bucket string) *Media {
	if presign == nil {
		presign = s3.NewPresignClient(client)
	}
	return &Media{client: client, presign: presign, bucket: bucket}
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

// Put implements jobs.Media: one PutObject with contentType and SSE-S3
// (AES256). A reader that cannot seek is read into memory first (the SDK
// needs to rewind a body to sign and retry it); it must yield size bytes.
func (m *Media) Put(ctx context.Context, key, contentType string, r io.Reader, size int64) error {
	body, ok := r.(io.ReadSeeker)
	if !ok {
		b, err := io.ReadAll(io.LimitReader(r, size+1))
		if err != nil {
			return fmt.Errorf("put %s: read: %w", key, err)
		}
		if int64(len(b)) != size {
			return fmt.Errorf("put %s: got %d bytes, want %d", key, len(b), size)
		}
		body = bytes.NewReader(b)
	}
	_, err := m.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:               aws.String(m.bucket),
		Key:                  aws.String(key),
		Body:                 body,
		ContentLength:        aws.Int64(size),
		ContentType:          aws.String(contentType),
		ServerSideEncryption: types.ServerSideEncryptionAes256,
	})
	if err != nil {
		return fmt.Errorf("put %s: %w", key, err)
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
