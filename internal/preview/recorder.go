package preview

import (
	"sync"

	"github.com/policyrollout/reconciler/internal/engine"
)

// Recorder keeps the most recent live requests, bounded both in number
// and in (estimated) bytes, so that a new or updated experiment can be
// replayed against recent traffic at once instead of waiting for more.
// It is fed by the shadow workers, never by the live path.
type Recorder struct {
	mu       sync.Mutex
	ring     []recorded // circular; len(ring) is the request bound
	head, n  int        // oldest entry and entry count
	bytes    int64
	maxBytes int64
}

type recorded struct {
	policy string
	req    *engine.Request
	size   int64
}

// NewRecorder returns a recorder of at most maxRequests requests and
// maxBytes bytes (both must be positive).
func NewRecorder(maxRequests int, maxBytes int64) *Recorder {
	return &Recorder{ring: make([]recorded, max(1, maxRequests)), maxBytes: max(1, maxBytes)}
}

// Add records a copy of req for policyName (retain.go), evicting the
// oldest requests as needed. A single request over the byte bound is not
// recorded. The copy shares no memory with req, so the recorder never
// keeps a body or buffer req's strings point into, only what it counts.
func (r *Recorder) Add(policyName string, req *engine.Request) {
	size := requestSize(req) + int64(len(policyName))
	if size > r.maxBytes {
		return
	}
	r.put(policyName, retained(req), size)
}

// keepBodyMax is the largest body whose decoded request AddDecoded keeps
// as it is. The copy Add makes was most of the preview worker's cost per
// live decision (issue 26: 2.1 of 25 µs, and a third of the bytes a
// decision allocated), and a request decoded from a small body pins little
// more than its fields: the body, which is counted. A larger body may be
// mostly padding, which would fill the byte bound with what no replay
// uses, so its request is copied as Add does.
const keepBodyMax = 2 << 10

// AddDecoded is Add for a request decoded from a body of the given
// length. Up to keepBodyMax it records req itself, without a copy, and
// counts the body besides the fields: req's strings may share one copy of
// the body (engine's decoder), never more. The caller must not modify req
// afterwards.
func (r *Recorder) AddDecoded(policyName string, req *engine.Request, body int) {
	if body <= 0 || body > keepBodyMax {
		r.Add(policyName, req)
		return
	}
	size := requestSize(req) + roundUp(int64(body), 16) + int64(len(policyName))
	if size > r.maxBytes {
		return
	}
	r.put(policyName, req, size)
}

// put records req, of size bytes, evicting the oldest requests as needed.
func (r *Recorder) put(policyName string, req *engine.Request, size int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for r.n > 0 && (r.n == len(r.ring) || r.bytes+size > r.maxBytes) {
		r.evict()
	}
	r.ring[(r.head+r.n)%len(r.ring)] = recorded{policy: policyName, req: req, size: size}
	r.n++
	r.bytes += size
}

func (r *Recorder) evict() {
	old := &r.ring[r.head]
	r.bytes -= old.size
	*old = recorded{}
	r.head = (r.head + 1) % len(r.ring)
	r.n--
}

// Requests returns the recorded requests of policyName, oldest first.
func (r *Recorder) Requests(policyName string) []*engine.Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*engine.Request
	for i := range r.n {
		if e := &r.ring[(r.head+i)%len(r.ring)]; e.policy == policyName {
			out = append(out, e.req)
		}
	}
	return out
}

// Usage returns how many requests and estimated bytes are recorded.
func (r *Recorder) Usage() (requests int, bytes int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n, r.bytes
}

// requestStructBytes is the size class of engine.Request's 216 bytes
// (TestRequestStructBytes).
const requestStructBytes = 224

// requestSize is the memory a recorded copy of req holds (retained):
// the struct, one buffer of all its strings, the lists of its query,
// headers and groups, and its attributes' maps, lists and boxed values,
// sized as the Go runtime allocates them (an attribute map of one entry
// is a table of 8 slots).
func requestSize(req *engine.Request) int64 {
	n := int64(requestStructBytes) + roundUp(int64(stringBytes(req)), 16)
	n += pairsBytes(req.Query) + pairsBytes(req.Headers)
	if req.Groups != nil {
		n += roundUp(16*int64(len(req.Groups)), 16)
	}
	if req.Attributes != nil {
		n += valueSize(req.Attributes)
	}
	return n
}

// valueSize is what an attribute value holds besides its string bytes:
// an interface boxes a string header (16 bytes), a list header (24) or a
// number (8); a map is its table.
func valueSize(v any) int64 {
	switch x := v.(type) {
	case string:
		return 16
	case map[string]any:
		n := mapBytes(len(x))
		for _, e := range x {
			n += valueSize(e)
		}
		return n
	case []any:
		n := 24 + roundUp(16*int64(len(x)), 16)
		for _, e := range x {
			n += valueSize(e)
		}
		return n
	case float64:
		return 8
	}
	return 0
}

// pairsBytes is the size of the list of a query or headers: 32 bytes an
// entry, exact up to 16 entries (512 bytes, where the runtime's size
// classes are 32 bytes apart at most), at most an eighth under beyond.
func pairsBytes(p engine.Pairs) int64 {
	return roundUp(32*int64(p.Len()), 16)
}

// mapBytes is the size of a map of n entries of 32 bytes (string keys,
// string or interface values): its header and a table of slots, 8 at
// least and at most 7/8 full, each with a control byte.
func mapBytes(n int) int64 {
	slots := int64(8)
	for slots*7/8 < int64(n) {
		slots *= 2
	}
	return 48 + slots*33
}

func roundUp(n, to int64) int64 { return (n + to - 1) / to * to }
