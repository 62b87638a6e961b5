package api

import (
	"encoding/json"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/policyrollout/reconciler/internal/engine"
)

const hexDigits = "0123456789abcdef"

// appendJSONString appends s as a JSON string. It escapes what JSON
// requires plus <, >, & and U+2028/U+2029 like encoding/json, and replaces
// invalid UTF-8 with U+FFFD, so its output equals json.Marshal's.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			b = appendEscapedByte(b, c)
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, `\u202`...)
			b = append(b, hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

func appendEscapedByte(b []byte, c byte) []byte {
	switch c {
	case '"', '\\':
		return append(b, '\\', c)
	case '\n':
		return append(b, '\\', 'n')
	case '\r':
		return append(b, '\\', 'r')
	case '\t':
		return append(b, '\\', 't')
	default:
		return append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
	}
}

// appendDecision appends the decision answer of CONTRACT.md §4:
// {"decision","rule","policy","etag","generation"} plus "error" when the
// policy's on_error applied.
func appendDecision(b []byte, d *engine.Decision, generation uint64) []byte {
	b = append(b, `{"decision":`...)
	b = appendJSONString(b, string(d.Verdict))
	b = append(b, `,"rule":`...)
	b = appendJSONString(b, d.Rule)
	b = append(b, `,"policy":`...)
	b = appendJSONString(b, d.Policy)
	b = append(b, `,"etag":`...)
	b = appendJSONString(b, d.Etag)
	b = append(b, `,"generation":`...)
	b = strconv.AppendUint(b, generation, 10)
	if d.Error != "" {
		b = append(b, `,"error":`...)
		b = appendJSONString(b, d.Error)
	}
	return append(b, "}\n"...)
}

// The header values of every JSON answer. writeJSON stores these slices
// in the header map directly (the keys are canonical), saving Header.Set's
// allocation of a new slice per header and answer. Nothing writes into a
// header value slice: Set replaces it and Add appends, which copies once
// the capacity of 1 is used up.
var (
	headerJSON    = []string{"application/json"}
	headerNosniff = []string{"nosniff"}
)

// writeJSON writes a complete JSON body. net/http adds Content-Length
// itself for bodies that fit its buffer (every decision and error does), so
// keep-alive clients get no chunked encoding.
func writeJSON(w http.ResponseWriter, code int, body []byte) {
	h := w.Header()
	h["Content-Type"] = headerJSON
	h["X-Content-Type-Options"] = headerNosniff
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

// writeValue writes v with encoding/json, for the resource endpoints, which
// are not on the decision path.
func (s *Server) writeValue(w http.ResponseWriter, r *http.Request, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, append(body, '\n'))
}
