package credits

import (
	"math/big"
	"strings"
)

// Charge explains a record's cost line by line, as the console's request
// detail and `genway requests show` print it: each class of what the
// request used, times its rate, is an exact part; the parts' exact sum is
// rounded up once, to the micro-credit; that is the cost the ledger
// entry moved.
type Charge struct {
	Lines []ChargeLine `json:"lines"`
	// Sum is the exact sum of the parts, in credits (a decimal that may
	// have more than 6 places).
	Sum string `json:"sum"`
	// Rounded is Sum rounded up to the micro-credit: the one rounding of
	// the request.
	Rounded Amount `json:"rounded"`
	// Cost is what the record was charged: Rounded, except where a
	// charge was capped (an image never costs more than it held), and 0
	// for a failed request.
	Cost Amount `json:"cost"`
	// Entry is the id of the ledger entry that moved Cost ("" when
	// nothing moved): ChatEntryID of a chat record, SettlementID of an
	// image's or speech's reservation.
	Entry string `json:"entry,omitempty"`
}

// ChargeLine is one class of what a request used: Quantity units at Rate
// credits per Per units, which makes Part (exact, in credits).
type ChargeLine struct {
	Class    string `json:"class"` // "input", "cached input", "cache write (5 min)", "cache write (1 h)", "output", "images", "characters"
	Quantity int64  `json:"quantity"`
	Rate     Amount `json:"rate"`
	Per      int64  `json:"per"` // 1,000,000 tokens, 1 image, 1,000 characters
	Part     string `json:"part"`
	// Note adds what the line holds of another count: the reasoning
	// tokens of the output.
	Note string `json:"note,omitempty"`
}

// Explain returns r's charge, line by line. A chat record has a line per
// token class it used or is priced for (fresh input is its prompt less
// its cached and cache-write tokens); an image record one of images at
// the price per image, a speech record one of characters at the price
// per 1,000.
func (r Record) Explain() Charge {
	var lines []ChargeLine
	switch r.Kind {
	case KindImage:
		lines = append(lines, ChargeLine{Class: "images", Quantity: r.Units, Rate: r.UnitPrice, Per: 1})
	case KindSpeech:
		lines = append(lines, ChargeLine{Class: "characters", Quantity: r.Units, Rate: r.UnitPrice, Per: 1000})
	default:
		t, rt := r.Tokens, r.Rates
		fresh := t.Prompt - max(t.Cached, 0) - max(t.CacheWrite, 0) - max(t.CacheWrite1h, 0)
		for _, l := range []ChargeLine{
			{Class: "input", Quantity: max(fresh, 0), Rate: rt.Input},
			{Class: "cached input", Quantity: t.Cached, Rate: rt.CachedInput},
			{Class: "cache write (5 min)", Quantity: t.CacheWrite, Rate: rt.CacheWrite},
			{Class: "cache write (1 h)", Quantity: t.CacheWrite1h, Rate: rt.CacheWrite1h},
			{Class: "output", Quantity: t.Completion, Rate: rt.Output},
		} {
			if l.Quantity == 0 && l.Class != "input" && l.Class != "output" {
				continue // a class the request did not use
			}
			l.Per = 1_000_000
			if l.Class == "output" && t.Reasoning > 0 {
				l.Note = "of which " + big.NewInt(t.Reasoning).String() + " reasoning"
			}
			lines = append(lines, l)
		}
	}
	// Parts in units of 1e-12 credits (a micro-credit per million):
	// every part of every kind is a whole number of them.
	sum := new(big.Int)
	for i := range lines {
		l := &lines[i]
		p := new(big.Int).Mul(big.NewInt(max(l.Quantity, 0)), big.NewInt(max(int64(l.Rate), 0)))
		p.Mul(p, big.NewInt(1_000_000/l.Per))
		l.Part = pico(p)
		sum.Add(sum, p)
	}
	c := Charge{Lines: lines, Sum: pico(sum), Cost: r.Cost}
	q, m := new(big.Int).QuoRem(sum, big.NewInt(1_000_000), new(big.Int))
	if m.Sign() > 0 {
		q.Add(q, big.NewInt(1))
	}
	if q.IsInt64() && q.Int64() <= int64(MaxAmount) {
		c.Rounded = Amount(q.Int64())
	} else {
		c.Rounded = MaxAmount
	}
	switch {
	case r.Cost <= 0:
	case r.Chat():
		c.Entry = ChatEntryID(r.ID)
	default:
		c.Entry = SettlementID(r.ID)
	}
	return c
}

// pico formats n units of 1e-12 credits as a decimal number of credits,
// without trailing zeros.
func pico(n *big.Int) string {
	s := n.String()
	if len(s) <= 12 {
		s = strings.Repeat("0", 13-len(s)) + s
	}
	whole, frac := s[:len(s)-12], strings.TrimRight(s[len(s)-12:], "0")
	if frac == "" {
		return whole
	}
	return whole + "." + frac
}
