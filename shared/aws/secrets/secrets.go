// Package secrets reads secrets (the operator token, vendor keys) from
// SSM Parameter Store SecureString parameters by name, at container start
// and again after a TTL, so that a rotated secret reaches warm Lambda
// containers without a deploy, and no secret sits in a function's
// environment (where lambda:GetFunctionConfiguration would show it).
//
// A Cache is safe for concurrent use. When a refresh fails, the last good
// value is kept (and the error logged by the caller): an SSM hiccup does
// not take the service down.
package secrets

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
)

// DefaultTTL is how long a value is used before it is read again.
const DefaultTTL = 5 * time.Minute

// Getter is the SSM call a Cache makes (*ssm.Client has it).
type Getter interface {
	GetParameter(ctx context.Context, in *ssm.GetParameterInput, opts ...func(*ssm.Options)) (*ssm.GetParameterOutput, error)
}

// Cache reads parameters through a Getter and keeps each for TTL.
type Cache struct {
	get Getter
	ttl time.Duration
	now func() time.Time

	mu      sync.Mutex
	entries map[string]entry
}

type entry struct {
	value string
	read  time.Time
}

// New returns a Cache over get; ttl <= 0 means DefaultTTL.
func New(get Getter, ttl time.Duration) *Cache {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	return &Cache{get: get, ttl: ttl, now: time.Now, entries: map[string]entry{}}
}

// ErrEmpty is returned for a parameter that exists with an empty value.
var ErrEmpty = errors.New("secret parameter is empty")

// Get returns the value of the parameter name, decrypted: from the cache
// while it is younger than the TTL, else read again. If the read fails and
// an older value is cached, Get returns that value and the error (the
// caller logs it and goes on); with nothing cached it returns "" and the
// error. Errors name the parameter, never a value.
func (c *Cache) Get(ctx context.Context, name string) (string, error) {
	c.mu.Lock()
	e, ok := c.entries[name]
	c.mu.Unlock()
	if ok && c.now().Sub(e.read) < c.ttl {
		return e.value, nil
	}
	out, err := c.get.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(name), WithDecryption: aws.Bool(true)})
	if err == nil && (out.Parameter == nil || aws.ToString(out.Parameter.Value) == "") {
		err = ErrEmpty
	}
	if err != nil {
		err = fmt.Errorf("read secret parameter %s: %w", name, err)
		if ok {
			return e.value, err
		}
		return "", err
	}
	v := aws.ToString(out.Parameter.Value)
	c.mu.Lock()
	c.entries[name] = entry{value: v, read: c.now()}
	c.mu.Unlock()
	return v, nil
}

// ParameterSuffix marks an environment variable that names the SSM
// parameter holding another one's value: OPENAI_API_KEY_PARAMETER=/genway/openai
// means OPENAI_API_KEY is the secret in /genway/openai.
const ParameterSuffix = "_PARAMETER"

// envReadTimeout bounds one read made by Env, which has no context.
const envReadTimeout = 10 * time.Second

// Lookup returns the lookup of a Lambda function's configuration whose
// secrets are in SSM: for a name N that params maps to a parameter (N's
// N_PARAMETER variable), the value of that parameter, read through cache
// (so at most once per TTL); otherwise vars[N], with no error. A parameter
// wins over the plain value; an empty parameter name is no parameter.
//
// Errors are Cache.Get's: they name the parameter, never a value, and a
// failed re-read comes with the last value read. Read what must be there at
// container start (vendor keys) with Lookup, and fail the start on its
// error.
func Lookup(params, vars map[string]string, cache *Cache) func(ctx context.Context, name string) (string, error) {
	return func(ctx context.Context, name string) (string, error) {
		if param := params[name]; param != "" {
			return cache.Get(ctx, param)
		}
		return vars[name], nil
	}
}
