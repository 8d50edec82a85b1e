package chat

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/genway/genway/shared/apierr"
)

// This file reads the prompt-cache breakpoints of a request (cache_control
// on content parts and tools) and keeps to each provider's rules for them
// (CacheRules).

// cacheControl decodes the cache_control sent at param: nil if it is
// absent or null; else {"type": "ephemeral"} with an optional "ttl" of
// "5m" (the default) or "1h", or a 400 naming the field at fault.
func cacheControl(raw json.RawMessage, param string) (*CacheControl, error) {
	if !isSet(raw) {
		return nil, nil
	}
	var cc struct {
		Type json.RawMessage `json:"type"`
		TTL  json.RawMessage `json:"ttl"`
	}
	if !isObject(raw) || json.Unmarshal(raw, &cc) != nil {
		return nil, apierr.Invalidf(param, "invalid_value", `cache_control must be an object: {"type": "ephemeral"}, with an optional "ttl" of "5m" or "1h"`)
	}
	if !isSet(cc.Type) {
		return nil, apierr.Invalidf(param+".type", "missing_field", `cache_control.type is required: "ephemeral"`)
	}
	if !bytes.Equal(bytes.TrimSpace(cc.Type), []byte(`"ephemeral"`)) {
		return nil, apierr.Invalidf(param+".type", "invalid_value", `cache_control.type must be "ephemeral", not %s`, bytes.TrimSpace(cc.Type))
	}
	c := &CacheControl{TTL: CacheTTL5m, param: param}
	if isSet(cc.TTL) {
		var ttl string
		if json.Unmarshal(cc.TTL, &ttl) != nil || (ttl != CacheTTL5m && ttl != CacheTTL1h) {
			return nil, apierr.Invalidf(param+".ttl", "invalid_value", `cache_control.ttl must be "5m" or "1h", not %s`, bytes.TrimSpace(cc.TTL))
		}
		c.TTL = ttl
	}
	return c, nil
}

// toolCache decodes the cache_control of tools[i], t: on the tool, or on
// its function, not both.
func toolCache(t ParamsTool, i int) (*CacheControl, error) {
	onTool, onFunction := isSet(t.CacheControl), isSet(t.Function.CacheControl)
	switch {
	case onTool && onFunction:
		return nil, apierr.Invalidf(fmt.Sprintf("tools[%d].function.cache_control", i), "invalid_value", "cache_control is set on the tool and on its function; set it once")
	case onTool:
		return cacheControl(t.CacheControl, fmt.Sprintf("tools[%d].cache_control", i))
	case onFunction:
		return cacheControl(t.Function.CacheControl, fmt.Sprintf("tools[%d].function.cache_control", i))
	}
	return nil, nil
}

// messageCache puts c (nil: none), the cache_control of message m, at the
// end of m: after its tool calls (Message.Cache) for an assistant message
// that calls tools, else on its last non-empty part, unless that part has
// one of its own. An empty message has nothing to mark.
func messageCache(m *Message, c *CacheControl) {
	if c == nil {
		return
	}
	if len(m.ToolCalls) > 0 {
		m.Cache = c
		return
	}
	for j := len(m.Parts) - 1; j >= 0; j-- {
		p := &m.Parts[j]
		if p.Image == nil && p.Text == "" {
			continue
		}
		if p.Cache == nil {
			p.Cache = c
		}
		return
	}
}

// cacheBreakpoints makes req's breakpoints what the model's provider
// takes (its CacheProvider rules; none for another provider): it removes
// those the provider does not forward, sends a one-hour breakpoint as a
// five-minute one where the model has no one-hour cache, and refuses,
// with a 400 naming the breakpoint at fault, a request with more
// breakpoints than the provider takes, or with a one-hour breakpoint
// after a five-minute one. Breakpoints count in the order the vendors
// read a prompt: tools, system messages, the other messages (a message's
// parts, then the breakpoint after its tool calls); a tool message is one
// block, so its first breakpoint counts and any other in it is removed.
func cacheBreakpoints(req *Request, caps Caps) error {
	if !hasBreakpoints(req) {
		return nil
	}
	k := keeper{model: req.Model.ID, rules: caps.cacheRules(req.Model)}
	for i := range req.Tools {
		if err := k.keep(&req.Tools[i].Cache, k.rules.Tools); err != nil {
			return err
		}
	}
	for _, system := range [2]bool{true, false} {
		for i := range req.Messages {
			m := &req.Messages[i]
			if (m.Role == RoleSystem) != system {
				continue
			}
			first := true // for a tool message: its first breakpoint
			for j := range m.Parts {
				c := &m.Parts[j].Cache
				if *c == nil {
					continue
				}
				if err := k.keep(c, m.Role != RoleTool || first); err != nil {
					return err
				}
				first = false
			}
			if err := k.keep(&m.Cache, true); err != nil {
				return err
			}
		}
	}
	return nil
}

// hasBreakpoints reports whether req carries a breakpoint.
func hasBreakpoints(req *Request) bool {
	for i := range req.Tools {
		if req.Tools[i].Cache != nil {
			return true
		}
	}
	for i := range req.Messages {
		if req.Messages[i].Cache != nil {
			return true
		}
		for j := range req.Messages[i].Parts {
			if req.Messages[i].Parts[j].Cache != nil {
				return true
			}
		}
	}
	return false
}

// keeper applies a provider's rules to a request's breakpoints, in order.
type keeper struct {
	model string
	rules CacheRules
	n     int    // the breakpoints kept so far
	short string // the param of the first five-minute breakpoint kept
}

// keep keeps the breakpoint *c (nil: none) if the provider forwards it
// (forward, and the rules), else removes it; it refuses the one past the
// limit, and a one-hour one after a five-minute one.
func (k *keeper) keep(c **CacheControl, forward bool) error {
	cc := *c
	if cc == nil {
		return nil
	}
	if !forward || k.rules.Breakpoints == 0 {
		*c = nil
		return nil
	}
	if cc.TTL == CacheTTL1h && !k.rules.TTL1h {
		cc.TTL = CacheTTL5m
	}
	if k.n++; k.n > k.rules.Breakpoints {
		return apierr.Invalidf(cc.param, "invalid_value",
			"model %q takes at most %d cache_control breakpoints in a request (counted in the order tools, system, messages); this is breakpoint %d",
			k.model, k.rules.Breakpoints, k.n)
	}
	switch {
	case cc.TTL == CacheTTL5m && k.short == "":
		k.short = cc.param
	case cc.TTL == CacheTTL1h && k.short != "":
		return apierr.Invalidf(cc.param, "invalid_value",
			`model %q takes longer cache lifetimes first (in the order tools, system, messages): this ttl "1h" breakpoint comes after the five-minute one at %s`,
			k.model, k.short)
	}
	return nil
}
