package awsenv

import (
	"context"
	"net/http"
	"os"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/genway/genway/shared/aws/mototest"
)

// isolate keeps the SDK away from the machine's AWS configuration.
func isolate(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("AWS_CONFIG_FILE", dir+"/config")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", dir+"/credentials")
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	for _, k := range []string{"AWS_PROFILE", "AWS_CA_BUNDLE", "AWS_REGION", "AWS_DEFAULT_REGION", "AWS_ENDPOINT_URL"} {
		t.Setenv(k, "") // restored after the test
		os.Unsetenv(k)
	}
}

func TestLoadConfig(t *testing.T) {
	isolate(t)
	ctx := context.Background()
	if _, err := LoadConfig(ctx, Settings{}); err == nil {
		t.Errorf("LoadConfig(no region) = nil error; want one")
	}
	endpoint := mototest.Start(t)
	cfg, err := LoadConfig(ctx, Settings{Region: "eu-west-1", Endpoint: endpoint})
	if err != nil {
		t.Fatalf("LoadConfig = %v", err)
	}
	if cfg.Region != "eu-west-1" || aws.ToString(cfg.BaseEndpoint) != endpoint {
		t.Errorf("LoadConfig = region %q endpoint %q; want eu-west-1, %s", cfg.Region, aws.ToString(cfg.BaseEndpoint), endpoint)
	}
	// The configuration reaches moto: a call with it succeeds.
	if _, err := sqs.NewFromConfig(cfg).ListQueues(ctx, &sqs.ListQueuesInput{}); err != nil {
		t.Errorf("ListQueues with LoadConfig's configuration = %v", err)
	}
}

// countingClient records how many of its requests ran at once.
type countingClient struct {
	active, most atomic.Int32
}

func (c *countingClient) Do(r *http.Request) (*http.Response, error) {
	n := c.active.Add(1)
	for {
		m := c.most.Load()
		if n <= m || c.most.CompareAndSwap(m, n) {
			break
		}
	}
	runtime.Gosched()
	c.active.Add(-1)
	return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
}

// TestLocalDynamoDB: an endpoint on this machine (moto) gets a client that
// sends one request at a time; any other endpoint, or none, keeps the
// client as it is.
func TestLocalDynamoDB(t *testing.T) {
	tests := []struct {
		env    Settings
		serial bool
	}{
		{Settings{Endpoint: "http://127.0.0.1:5000"}, true},
		{Settings{Endpoint: "http://localhost:4566"}, true},
		{Settings{Endpoint: "http://[::1]:8000"}, true},
		{Settings{Endpoint: "https://dynamodb.us-east-1.amazonaws.com", EndpointDynamoDB: "http://127.0.0.1:8000"}, true},
		{Settings{Endpoint: "http://127.0.0.1:5000", EndpointDynamoDB: "https://dynamodb.eu-west-1.amazonaws.com"}, false},
		{Settings{Endpoint: "http://10.0.0.5:8000"}, false},
		{Settings{Endpoint: "https://dynamodb.us-east-1.amazonaws.com"}, false},
		{Settings{}, false},
	}
	for _, tt := range tests {
		fake := &countingClient{}
		o := dynamodb.Options{HTTPClient: fake}
		LocalDynamoDB(tt.env)(&o)
		if _, wrapped := o.HTTPClient.(*oneAtATime); wrapped != tt.serial {
			t.Errorf("%+v: one at a time %v; want %v", tt.env, wrapped, tt.serial)
			continue
		}
		if !tt.serial {
			continue
		}
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 50 {
					req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:5000/", nil)
					o.HTTPClient.Do(req)
				}
			}()
		}
		wg.Wait()
		if m := fake.most.Load(); m != 1 {
			t.Errorf("%v: %d requests ran at once; want 1", tt.env, m)
		}
	}
}

// gateClient is an HTTP client whose requests each wait for a value on
// release, and that records their order by the X-Name header.
type gateClient struct {
	release chan struct{}
	mu      sync.Mutex
	order   []string
}

func (c *gateClient) Do(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.order = append(c.order, r.Header.Get("X-Name"))
	c.mu.Unlock()
	<-c.release
	return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
}

// TestOneAtATimeBackground: a background request waiting beside a
// foreground one goes after it, whichever came first; alone it goes.
func TestOneAtATimeBackground(t *testing.T) {
	fake := &gateClient{release: make(chan struct{})}
	s := newOneAtATime(fake)
	send := func(name string, bg bool, done chan<- string) {
		ctx := context.Background()
		if bg {
			ctx = Background(ctx)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://127.0.0.1:5000/", nil)
		req.Header.Set("X-Name", name)
		s.Do(req)
		done <- name
	}
	// waitFor waits until the client's state satisfies ok (bounded).
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			s.mu.Lock()
			done := ok()
			s.mu.Unlock()
			if done {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("no %s within 10 s", what)
			}
		}
	}
	done := make(chan string, 4)
	go send("first", false, done) // takes the client
	waitFor("request in flight", func() bool { return s.busy })
	go send("catch-up", true, done)
	waitFor("background request waiting", func() bool { return s.behind == 1 })
	go send("new work", false, done)
	waitFor("foreground request waiting", func() bool { return s.waiting == 1 })
	for range 3 {
		fake.release <- struct{}{}
		<-done
	}
	if want := []string{"first", "new work", "catch-up"}; !slices.Equal(fake.order, want) {
		t.Errorf("requests sent in the order %v; want %v (background last)", fake.order, want)
	}
	go send("alone", true, done)
	fake.release <- struct{}{}
	if got := <-done; got != "alone" {
		t.Errorf("a background request with nothing waiting = %q; want it sent", got)
	}
}
