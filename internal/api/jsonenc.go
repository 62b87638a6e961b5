package api

import (
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/policyrollout/reconciler/internal/engine"
	"github.com/policyrollout/reconciler/internal/jsonenc"
)

// appendDecision appends the decision answer of CONTRACT.md §4:
// {"decision","rule","policy","etag","generation"} plus "error" when the
// policy's on_error applied.
func appendDecision(b []byte, d *engine.Decision, generation uint64) []byte {
	b = append(b, `{"decision":`...)
	b = jsonenc.AppendString(b, string(d.Verdict))
	b = append(b, `,"rule":`...)
	b = jsonenc.AppendString(b, d.Rule)
	b = append(b, `,"policy":`...)
	b = jsonenc.AppendString(b, d.Policy)
	b = append(b, `,"etag":`...)
	b = jsonenc.AppendString(b, d.Etag)
	b = append(b, `,"generation":`...)
	b = strconv.AppendUint(b, generation, 10)
	if d.Error != "" {
		b = append(b, `,"error":`...)
		b = jsonenc.AppendString(b, d.Error)
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
func (s *core) writeValue(w http.ResponseWriter, r *http.Request, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	body = append(body, '\n')
	if notModified(w, r, body) { // etag.go
		return
	}
	writeJSON(w, http.StatusOK, body)
}
