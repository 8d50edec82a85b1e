package chat

import (
	"context"
	"errors"
	"fmt"
)

// TokenCounter is implemented by a Provider whose upstream counts the
// input tokens of a request without running it (Anthropic's
// /v1/messages/count_tokens). CountTokens returns that count, or
// ErrNoTokenCount when it cannot count for req (the gateway then
// estimates); any other error is the upstream's (an *UpstreamError).
type TokenCounter interface {
	CountTokens(ctx context.Context, req *Request) (int, error)
}

// ErrNoTokenCount is a TokenCounter's answer for a request its upstream
// cannot count.
var ErrNoTokenCount = errors.New("the provider cannot count this request's tokens")

// TokenCount is the answer of Gateway.CountTokens.
type TokenCount struct {
	Model string // the catalog model counted for
	Input int    // input tokens
	// Estimated: Input is the gateway's estimate (see Estimates), not the
	// provider's count.
	Estimated bool
}

// CountTokens returns the input tokens p would send to its model: the
// provider's own count when it is a TokenCounter, else the gateway's
// estimate of the input (see Estimates: about 4 bytes a token, 765 an
// image, 4 a message). p is validated as Run validates it (a 400 naming
// the field; the API key must be allowed the model: 403 naming it); an
// alias counts for the target a request would try first. Nothing is
// admitted, charged or recorded, and no image URL is fetched.
func (g *Gateway) CountTokens(ctx context.Context, p *Params) (TokenCount, error) {
	ids, err := g.candidates(ctx, p)
	if err != nil {
		return TokenCount{}, err
	}
	if p.Model != ids[0] {
		cp := *p
		cp.Model = ids[0]
		p = &cp
	}
	c, err := g.Prepare(ctx, p)
	if err != nil {
		return TokenCount{}, err
	}
	m := c.Request.Model
	if tc := Capabilities(c.provider).Counter; tc != nil {
		n, err := tc.CountTokens(ctx, c.Request)
		if err == nil {
			return TokenCount{Model: m.ID, Input: n}, nil
		}
		if !errors.Is(err, ErrNoTokenCount) {
			return TokenCount{}, fmt.Errorf("%s: count tokens: %w", m.ID, err)
		}
	}
	return TokenCount{Model: m.ID, Input: measureInput(p).estimate(), Estimated: true}, nil
}
