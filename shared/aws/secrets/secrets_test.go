package secrets

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/aws-sdk-go-v2/service/ssm/types"
)

// fakeSSM answers GetParameter from a map; fail makes it fail.
type fakeSSM struct {
	values map[string]string
	fail   bool
	calls  atomic.Int32
}

func (f *fakeSSM) GetParameter(ctx context.Context, in *ssm.GetParameterInput, _ ...func(*ssm.Options)) (*ssm.GetParameterOutput, error) {
	f.calls.Add(1)
	if !aws.ToBool(in.WithDecryption) {
		return nil, errors.New("SecureString read without decryption")
	}
	if f.fail {
		return nil, errors.New("throttled")
	}
	v, ok := f.values[aws.ToString(in.Name)]
	if !ok {
		return nil, &types.ParameterNotFound{}
	}
	return &ssm.GetParameterOutput{Parameter: &types.Parameter{Value: aws.String(v)}}, nil
}

func TestRotationAfterTTL(t *testing.T) {
	f := &fakeSSM{values: map[string]string{"/genway/token": "old-secret"}}
	c := New(f, time.Minute)
	now := time.Unix(1000, 0)
	c.now = func() time.Time { return now }
	ctx := context.Background()
	for _, step := range []struct {
		advance time.Duration
		rotate  string
		want    string
		calls   int32
	}{
		{0, "", "old-secret", 1},
		{30 * time.Second, "new-secret", "old-secret", 1}, // rotated, but the cached value is young
		{31 * time.Second, "", "new-secret", 2},           // past the TTL: read again
		{10 * time.Second, "", "new-secret", 2},
	} {
		now = now.Add(step.advance)
		if step.rotate != "" {
			f.values["/genway/token"] = step.rotate
		}
		got, err := c.Get(ctx, "/genway/token")
		if err != nil || got != step.want || f.calls.Load() != step.calls {
			t.Fatalf("after %v: Get = %q, %v (%d reads); want %q (%d reads)", step.advance, got, err, f.calls.Load(), step.want, step.calls)
		}
	}
}

func TestFailureKeepsLastValue(t *testing.T) {
	f := &fakeSSM{values: map[string]string{"k": "s3cr3t-value"}}
	c := New(f, time.Minute)
	now := time.Unix(1000, 0)
	c.now = func() time.Time { return now }
	if _, err := c.Get(context.Background(), "k"); err != nil {
		t.Fatal(err)
	}
	f.fail = true
	now = now.Add(2 * time.Minute)
	got, err := c.Get(context.Background(), "k")
	if got != "s3cr3t-value" || err == nil {
		t.Errorf("Get during an outage = %q, %v; want the last value and the error", got, err)
	}
	if strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("error %q shows the secret", err)
	}
}

func TestMissingAndEmpty(t *testing.T) {
	f := &fakeSSM{values: map[string]string{"empty": ""}}
	c := New(f, 0)
	for _, name := range []string{"missing", "empty"} {
		if v, err := c.Get(context.Background(), name); err == nil || v != "" || !strings.Contains(err.Error(), name) {
			t.Errorf("Get(%s) = %q, %v; want an error naming it", name, v, err)
		}
	}
}

// TestLookup: a variable whose _PARAMETER is set is read from SSM
// (once per TTL), any other from the environment; an unreadable parameter
// is Lookup's error, naming it, at every lookup.
func TestLookup(t *testing.T) {
	f := &fakeSSM{values: map[string]string{"/genway/openai": "sk-from-ssm"}}
	c := New(f, time.Minute)
	params := map[string]string{ // the _PARAMETER variables
		"OPENAI_API_KEY":      "/genway/openai",
		"GEMINI_API_KEY":      "/genway/missing",
		"REPLICATE_API_TOKEN": "",
	}
	vars := map[string]string{
		"OPENAI_API_KEY":    "sk-from-env-ignored",
		"ANTHROPIC_API_KEY": "sk-ant-plain",
		"GENWAY_SYNTHETIC":  "on",
	}
	lookup := Lookup(params, vars, c)
	tests := []struct {
		name    string
		want    string
		wantErr string
	}{
		{"OPENAI_API_KEY", "sk-from-ssm", ""},
		{"ANTHROPIC_API_KEY", "sk-ant-plain", ""},
		{"GENWAY_SYNTHETIC", "on", ""},
		{"REPLICATE_API_TOKEN", "", ""}, // an empty _PARAMETER is no parameter
		{"GEMINI_API_KEY", "", "/genway/missing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := lookup(context.Background(), tt.name)
			if got != tt.want || (err == nil) != (tt.wantErr == "") || (err != nil && !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("Lookup(%s) = %q, %v; want %q and an error containing %q", tt.name, got, err, tt.want, tt.wantErr)
			}
			got, err = lookup(context.Background(), tt.name) // again: from the cache, or read again if missing
			if got != tt.want || (err == nil) != (tt.wantErr == "") {
				t.Errorf("Lookup(%s) again = %q, %v; want %q and an error containing %q", tt.name, got, err, tt.want, tt.wantErr)
			}
		})
	}
	// Two lookups of OPENAI_API_KEY and one of the missing parameter per
	// subtest: the cached key is read once, the missing one every time.
	if got := f.calls.Load(); got != 3 {
		t.Errorf("%d SSM reads; want 3 (the key once, the missing parameter twice)", got)
	}
}
