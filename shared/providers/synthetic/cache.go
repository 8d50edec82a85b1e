package synthetic

import (
	"hash/fnv"
	"strconv"
	"sync"

	"github.com/genway/genway/shared/chat"
)

// maxCacheKeys bounds the prompt cache: when it holds this many keys, it
// is emptied before the next one is stored.
const maxCacheKeys = 4096

// promptCache is the synthetic provider's prompt cache, by
// prompt_cache_key, so that cached input tokens can be seen end to end
// without a vendor: a request with a key reads from the cache the leading
// messages it shares with the previous request with the same key (their
// prompt tokens are the answer's CachedTokens), and its own messages
// replace them for the next. Requests without a key neither read nor
// write. It lives in the process (each Lambda container has its own) and
// is safe for concurrent use.
type promptCache struct {
	mu   sync.Mutex
	keys map[string][]cachedMessage
}

// cachedMessage is one message of a cached prompt: its fingerprint and
// its prompt tokens.
type cachedMessage struct {
	sum    uint64
	tokens int
}

// read returns the prompt tokens of the leading messages of prompt that
// the previous prompt with key began with, and stores prompt for key.
func (c *promptCache) read(key string, prompt []cachedMessage) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	prev := c.keys[key]
	cached := 0
	for i := 0; i < len(prev) && i < len(prompt) && prev[i].sum == prompt[i].sum; i++ {
		cached += prompt[i].tokens
	}
	if c.keys == nil || (len(c.keys) >= maxCacheKeys && prev == nil) {
		c.keys = make(map[string][]cachedMessage)
	}
	c.keys[key] = prompt
	return cached
}

// fingerprint returns m's fingerprint for the cache: its role, texts,
// images, tool calls and the call it answers.
func fingerprint(m *chat.Message) uint64 {
	h := fnv.New64a()
	w := func(s string) {
		h.Write([]byte(strconv.Itoa(len(s))))
		h.Write([]byte{':'})
		h.Write([]byte(s))
	}
	w(m.Role)
	w(m.Name)
	w(m.ToolCallID)
	for _, p := range m.Parts {
		if p.Image != nil {
			w("image")
			w(p.Image.URL)
			w(p.Image.MediaType)
			w(string(p.Image.Data))
			continue
		}
		w(p.Text)
	}
	for _, tc := range m.ToolCalls {
		w(tc.ID)
		w(tc.Name)
		w(tc.Arguments)
	}
	return h.Sum64()
}
