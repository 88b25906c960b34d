// Package intl formats numbers as Node's ICU formats them for en-US
// (Intl.NumberFormat, Number.prototype.toLocaleString), with the currency
// tables recorded from Node (currencies.go). Package xstate/js gives it to
// machines' JavaScript, which goja runs without Intl.
package intl

//go:generate sh -c "node ../../scripts/gen-currencies.mjs > currencies.go && gofmt -w currencies.go"

import (
	"math"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Currency is how en-US shows a currency: its symbol, its narrow
// symbol, and its fraction digits.
type Currency struct {
	Symbol, Narrow string
	Digits         int
}

// CurrencyOf returns how en-US shows the currency of an ISO 4217 code
// (upper case): its code and 2 digits for one the tables do not hold.
func CurrencyOf(code string) Currency {
	if c, ok := enCurrencies[code]; ok {
		return c
	}
	return Currency{code, code, 2}
}

// NumberFormat is a resolved Intl.NumberFormat: its options, as
// resolvedOptions() names them.
type NumberFormat struct {
	Style           string // decimal, percent, currency
	Currency        string // the ISO 4217 code, upper case
	CurrencyDisplay string // symbol, narrowSymbol, code
	CurrencySign    string // standard, accounting
	MinInt          int    // minimumIntegerDigits
	MinFD, MaxFD    int    // minimum and maximumFractionDigits
	MinSD, MaxSD    int    // minimum and maximumSignificantDigits; 0 when fraction digits round
	Grouping        string // useGrouping: always, auto, min2, or false
	SignDisplay     string // auto, never, always, exceptZero, negative
}

// Format formats x as ICU does for en-US.
func (f *NumberFormat) Format(x float64) string {
	neg, zero := math.Signbit(x), false
	var body string
	switch {
	case math.IsNaN(x):
		neg, body = false, "NaN"
	case math.IsInf(x, 0):
		body = "∞"
	default:
		digits, point := decimalDigits(math.Abs(x))
		if f.Style == "percent" {
			point += 2
		}
		digits, point = f.round(digits, point)
		zero = digits == ""
		body = f.layout(digits, point)
	}
	sign := ""
	switch f.SignDisplay {
	case "auto":
		if neg {
			sign = "-"
		}
	case "always":
		sign = "+"
		if neg {
			sign = "-"
		}
	case "exceptZero":
		if !zero && !math.IsNaN(x) {
			sign = "+"
			if neg {
				sign = "-"
			}
		}
	case "negative":
		if neg && !zero {
			sign = "-"
		}
	}
	switch f.Style {
	case "percent":
		body += "%"
	case "currency":
		c := CurrencyOf(f.Currency)
		sym := c.Symbol
		switch f.CurrencyDisplay {
		case "narrowSymbol":
			sym = c.Narrow
		case "code":
			sym = f.Currency
		}
		// A symbol ending in a letter (a code, "F CFA") is set apart from
		// digits by a no-break space; "$" or "€" is not (nor NaN or ∞).
		if r, _ := utf8.DecodeLastRuneInString(sym); !unicode.IsSymbol(r) && body[0] >= '0' && body[0] <= '9' {
			sym += "\u00a0"
		}
		body = sym + body
		if f.CurrencySign == "accounting" && sign == "-" {
			return "(" + body + ")"
		}
	}
	return sign + body
}

// decimalDigits returns the shortest decimal digits of x (x >= 0) that
// read back as x, without leading or trailing zeros, and where the
// decimal point goes: x = 0.DIGITS × 10^point.
func decimalDigits(x float64) (string, int) {
	if x == 0 {
		return "", 1
	}
	s := strconv.FormatFloat(x, 'e', -1, 64) // d.ddde±XX
	mant, exp, _ := strings.Cut(s, "e")
	e, _ := strconv.Atoi(exp)
	digits := strings.Replace(mant, ".", "", 1)
	return strings.TrimRight(digits, "0"), e + 1
}

// round rounds digits (0.DIGITS × 10^point) half away from zero, to the
// significant digits or else the fraction digits of f, and drops
// trailing zeros.
func (f *NumberFormat) round(digits string, point int) (string, int) {
	keep := point + f.MaxFD // digits kept
	if f.MaxSD > 0 {
		keep = f.MaxSD
	}
	if keep < 0 {
		return "", 1
	}
	if len(digits) > keep {
		up := digits[keep] >= '5'
		digits = digits[:keep]
		if up {
			b := []byte(digits)
			i := len(b) - 1
			for ; i >= 0 && b[i] == '9'; i-- {
				b[i] = '0'
			}
			if i < 0 {
				b = append([]byte{'1'}, b...)
				point++
			} else {
				b[i]++
			}
			digits = string(b)
		}
	}
	digits = strings.TrimRight(digits, "0")
	if digits == "" {
		return "", 1
	}
	return digits, point
}

// layout writes 0.DIGITS × 10^point with the integer and fraction digits
// f asks for, and its grouping.
func (f *NumberFormat) layout(digits string, point int) string {
	var intPart, frac string
	switch {
	case point <= 0:
		intPart, frac = "", strings.Repeat("0", -point)+digits
	case point >= len(digits):
		intPart = digits + strings.Repeat("0", point-len(digits))
	default:
		intPart, frac = digits[:point], digits[point:]
	}
	intPart = strings.TrimLeft(intPart, "0")
	if n := f.MinInt - len(intPart); n > 0 {
		intPart = strings.Repeat("0", n) + intPart
	}
	if f.MaxSD > 0 {
		// Significant digits: pad to the minimum, counting from the first
		// non-zero digit.
		sig := len(strings.TrimLeft(intPart, "0")) + len(frac)
		if strings.TrimLeft(intPart, "0") == "" {
			sig = len(strings.TrimLeft(frac, "0"))
			if digits == "" {
				sig = 1 // zero counts one significant digit
			}
		}
		if n := f.MinSD - sig; n > 0 {
			frac += strings.Repeat("0", n)
		}
	} else if n := f.MinFD - len(frac); n > 0 {
		frac += strings.Repeat("0", n)
	}
	grouped := intPart
	if g := f.Grouping; g != "false" && !(g == "min2" && len(intPart) < 5) && len(intPart) > 3 {
		var b strings.Builder
		lead := len(intPart) % 3
		if lead > 0 {
			b.WriteString(intPart[:lead])
		}
		for i := lead; i < len(intPart); i += 3 {
			if b.Len() > 0 {
				b.WriteByte(',')
			}
			b.WriteString(intPart[i : i+3])
		}
		grouped = b.String()
	}
	if frac == "" {
		return grouped
	}
	return grouped + "." + frac
}
