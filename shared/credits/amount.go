package credits

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"reflect"
	"strconv"
	"strings"
)

// Amount is a quantity of credits, counted exactly in micro-credits (µcr):
// 1 credit is 1,000,000 µcr. Every balance, hold, charge, limit and price
// of the service is an Amount; none is ever a float. Its text (String,
// JSON) is a decimal number of credits, exact to 6 places ("999.989"), so
// amounts stored as whole credits before Amount existed read as the same
// credits.
//
// Amounts the service keeps stay within ±MaxAmount: ParseAmount refuses
// more, and sums that can grow (grants, a key's spend, usage) use Add,
// which refuses a result past it, instead of +.
type Amount int64

// Units of Amount.
const (
	Micro  Amount = 1         // one micro-credit, the smallest amount
	Credit Amount = 1_000_000 // one credit
)

// MaxAmount is the largest balance, grant, hold, limit, price or sum of
// them the service keeps: 1,000,000,000,000 credits (1e18 µcr). Two of
// them still add without overflowing an int64, so a checked sum (Add) is
// one addition and one comparison.
const MaxAmount = 1_000_000_000_000 * Credit

// Places is the number of decimal places of credits an Amount has.
const Places = 6

// ErrAmount is matched (errors.Is) by every error ParseAmount, Add and Mul
// return: an amount that is not a number, has more than Places decimal
// places, or is (or would become) beyond ±MaxAmount. (UnmarshalJSON
// returns a *json.UnmarshalTypeError instead: see AmountFieldError.)
var ErrAmount = errors.New("invalid amount")

// ErrAmountRange is matched (errors.Is) by the errors of an amount beyond
// ±MaxAmount: a parsed number too large, or a sum or product that would
// pass it (those of ParseAmount, Add and Mul match ErrAmount too). Stores
// return it for a grant or charge that would take a balance, a key's
// spend or a usage sum past the maximum, and write nothing.
var ErrAmountRange = errors.New("amount beyond the maximum")

// amountError is an error of ErrAmount, and of ErrAmountRange if tooLarge.
type amountError struct {
	msg      string
	tooLarge bool
}

func (e *amountError) Error() string { return e.msg }

func (e *amountError) Is(target error) bool {
	return target == ErrAmount || (e.tooLarge && target == ErrAmountRange)
}

// rangeError is the ErrAmountRange error of what (a number, a sum).
func rangeError(what string) error {
	return &amountError{msg: fmt.Sprintf("%s credits is beyond ±%s, the most any amount may be", what, MaxAmount), tooLarge: true}
}

// String returns a as decimal credits, in the shortest exact form: "1000",
// "999.989", "0.000001", "-3.5": no exponent, no trailing zeros.
func (a Amount) String() string {
	var buf [24]byte
	return string(a.appendText(buf[:0]))
}

// appendText appends a.String() to b.
func (a Amount) appendText(b []byte) []byte {
	u := uint64(a)
	if a < 0 {
		b = append(b, '-')
		u = -u // two's complement: exact even for the most negative int64
	}
	b = strconv.AppendUint(b, u/uint64(Credit), 10)
	frac := u % uint64(Credit)
	if frac == 0 {
		return b
	}
	var digits [Places]byte
	for i := Places - 1; i >= 0; i-- {
		digits[i] = byte('0' + frac%10)
		frac /= 10
	}
	n := Places
	for digits[n-1] == '0' {
		n--
	}
	b = append(b, '.')
	return append(b, digits[:n]...)
}

// MarshalJSON writes a as a JSON number of credits (String): 999.989, never
// a string.
func (a Amount) MarshalJSON() ([]byte, error) { return a.appendText(nil), nil }

// AppendJSON appends what MarshalJSON returns to b.
func (a Amount) AppendJSON(b []byte) []byte { return a.appendText(b) }

// UnmarshalJSON reads a JSON number of credits exactly (see ParseAmount);
// null leaves a as it is. A JSON string, or a number ParseAmount refuses,
// is a *json.UnmarshalTypeError, which encoding/json completes with the
// field's name: its Value is "string" or "number <the number>", and
// ParseAmount of that number says what is wrong with it.
func (a *Amount) UnmarshalJSON(b []byte) error {
	s := string(b)
	if s == "null" {
		return nil
	}
	if s == "" {
		return typeError("nothing")
	}
	switch s[0] {
	case '"':
		return typeError("string")
	case 't', 'f':
		return typeError("bool")
	case '{':
		return typeError("object")
	case '[':
		return typeError("array")
	}
	v, err := ParseAmount(s)
	if err != nil {
		return typeError("number " + s)
	}
	*a = v
	return nil
}

// ParseAmount reads a decimal number of credits exactly, with no float on
// the way: an optional sign, digits with an optional fraction, and an
// optional exponent ("1000", "0.25", "-3.5", "1E+3", "5e-1", "0E-6": the
// forms JSON, DynamoDB and JavaScript clients write). A number with more
// than 6 decimal places of credits once its exponent is applied, or beyond
// ±MaxAmount, is an error saying so; every error matches ErrAmount.
func ParseAmount(s string) (Amount, error) {
	i, neg := 0, false
	if i < len(s) && (s[i] == '+' || s[i] == '-') {
		neg = s[i] == '-'
		i++
	}
	// The significant digits (leading zeros dropped), and how many of
	// them follow the decimal point.
	var digits []byte
	fracDigits, seen := 0, false
	for ; i < len(s) && '0' <= s[i] && s[i] <= '9'; i++ {
		seen = true
		if len(digits) > 0 || s[i] != '0' {
			digits = append(digits, s[i])
		}
	}
	if i < len(s) && s[i] == '.' {
		for i++; i < len(s) && '0' <= s[i] && s[i] <= '9'; i++ {
			seen = true
			if len(digits) > 0 || s[i] != '0' {
				digits = append(digits, s[i])
			}
			fracDigits++
		}
	}
	exp := 0
	if seen && i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		eneg := false
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			eneg = s[i] == '-'
			i++
		}
		start := i
		for ; i < len(s) && '0' <= s[i] && s[i] <= '9'; i++ {
			if exp < 1_000_000 { // beyond it any non-zero number is out of range either way
				exp = exp*10 + int(s[i]-'0')
			}
		}
		if i == start {
			seen = false
		}
		if eneg {
			exp = -exp
		}
	}
	if !seen || i != len(s) {
		return 0, &amountError{msg: fmt.Sprintf("%q is not a decimal number of credits", shorten(s))}
	}
	if len(digits) == 0 {
		return 0, nil // zero, whatever its exponent
	}
	// The value is digits x 10^scale micro-credits.
	scale := exp - fracDigits + Places
	for scale < 0 && digits[len(digits)-1] == '0' {
		digits = digits[:len(digits)-1]
		scale++
	}
	if scale < 0 {
		return 0, &amountError{msg: fmt.Sprintf("%s credits has more than %d decimal places (the smallest amount is 0.000001 credits)", shorten(s), Places)}
	}
	if len(digits)+scale > 19 {
		return 0, rangeError(shorten(s))
	}
	var u uint64
	for _, d := range digits {
		u = u*10 + uint64(d-'0')
	}
	for range scale {
		u *= 10
	}
	if u > uint64(MaxAmount) { // 19 digits fit a uint64; past MaxAmount is refused here
		return 0, rangeError(shorten(s))
	}
	if neg {
		return -Amount(u), nil
	}
	return Amount(u), nil
}

// Add returns a + b, or an error matching ErrAmountRange if the sum is
// beyond ±MaxAmount (a and b themselves may be anything: the sum is
// checked for int64 overflow too).
func (a Amount) Add(b Amount) (Amount, error) {
	s := a + b
	if (a > 0 && b > 0 && s < 0) || (a < 0 && b < 0 && s >= 0) || !s.InRange() {
		return 0, rangeError(fmt.Sprintf("%s + %s", a, b))
	}
	return s, nil
}

// Mul returns a x n, or an error matching ErrAmountRange if the product is
// beyond ±MaxAmount.
func (a Amount) Mul(n int64) (Amount, error) {
	ua, neg := uint64(a), a < 0
	if neg {
		ua = -ua
	}
	un := uint64(n)
	if n < 0 {
		un, neg = -un, !neg
	}
	hi, lo := bits.Mul64(ua, un)
	if hi != 0 || lo > uint64(MaxAmount) {
		return 0, rangeError(fmt.Sprintf("%s x %d", a, n))
	}
	if neg {
		return -Amount(lo), nil
	}
	return Amount(lo), nil
}

// InRange reports whether a is within ±MaxAmount.
func (a Amount) InRange() bool { return -MaxAmount <= a && a <= MaxAmount }

// AmountFieldError reports whether err is encoding/json's refusal of a
// value for an Amount (see UnmarshalJSON), and if so returns the field's
// path ("credit_limit", "price.credits_per_second") and what is wrong with
// the value, as a sentence: "1.0000001 credits has more than 6 decimal
// places ...", "must be a number of credits, not a string".
func AmountFieldError(err error) (field, reason string, ok bool) {
	var te *json.UnmarshalTypeError
	if !errors.As(err, &te) || te.Type != reflect.TypeFor[Amount]() {
		return "", "", false
	}
	if n, isNum := strings.CutPrefix(te.Value, "number "); isNum {
		if _, perr := ParseAmount(n); perr != nil {
			return te.Field, perr.Error(), true
		}
	}
	return te.Field, "must be a number of credits, not " + te.Value, true
}

// shorten returns s, cut to 40 bytes for an error message.
func shorten(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// typeError is the *json.UnmarshalTypeError of a JSON value (Value:
// "string", "number 1.0000001") that is not an Amount.
func typeError(value string) error {
	return &json.UnmarshalTypeError{Value: value, Type: reflect.TypeFor[Amount]()}
}
