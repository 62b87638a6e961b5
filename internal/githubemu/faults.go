package githubemu

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// FaultKind is what an injected fault answers.
type FaultKind int

// The fault kinds, each answered with the status, headers and body GitHub
// sends for it.
const (
	// ServerError answers Fault.Status (default 502) {"message":"Server Error"}.
	ServerError FaultKind = iota
	// PrimaryRateLimit answers 403 with X-RateLimit-Remaining: 0 and
	// X-RateLimit-Reset (go-github: *RateLimitError).
	PrimaryRateLimit
	// SecondaryRateLimit answers 403 with a documentation_url ending in
	// #secondary-rate-limits and Retry-After (go-github: *AbuseRateLimitError).
	SecondaryRateLimit
	// TooManyRequests answers 429 with Retry-After (go-github v60: a plain
	// *ErrorResponse).
	TooManyRequests
)

// Fault is an injected failure for the requests it matches.
type Fault struct {
	Kind FaultKind
	// Status overrides ServerError's status code.
	Status int
	// Method and Path restrict the fault: the method, and a substring of
	// the path after the API prefix. Empty matches any.
	Method string
	Path   string
	// Times is how many matching requests fail (default 1).
	Times int
	// RetryAfter is the Retry-After of SecondaryRateLimit and
	// TooManyRequests (whole seconds, rounded up; default 60s).
	RetryAfter time.Duration
	// Reset is PrimaryRateLimit's X-RateLimit-Reset (default in an hour).
	Reset time.Time
	// AfterHandling applies the request before answering with the fault:
	// the answer is lost, the effect is not (a proxy timing out after
	// GitHub did the work).
	AfterHandling bool
}

// Inject adds a fault. Faults are matched in the order added.
func (s *Server) Inject(f Fault) {
	if f.Times <= 0 {
		f.Times = 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, &f)
}

// FailNext makes the next n requests answer status (a 5xx).
func (s *Server) FailNext(n, status int) {
	s.Inject(Fault{Kind: ServerError, Status: status, Times: n})
}

// ClearFaults drops the faults not served yet: GitHub recovered.
func (s *Server) ClearFaults() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = nil
}

// PendingFaults counts the failures still to be served.
func (s *Server) PendingFaults() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, f := range s.faults {
		n += f.Times
	}
	return n
}

// takeFault returns a copy of the first fault matching r, spending one of
// its uses. Caller holds s.mu.
func (s *Server) takeFault(r *http.Request) *Fault {
	for i, f := range s.faults {
		if (f.Method != "" && f.Method != r.Method) || !strings.Contains(r.URL.Path, f.Path) {
			continue
		}
		f.Times--
		if f.Times == 0 {
			s.faults = append(s.faults[:i], s.faults[i+1:]...)
		}
		cp := *f
		return &cp
	}
	return nil
}

// writeFault answers with f as GitHub would.
func (s *Server) writeFault(w http.ResponseWriter, f *Fault) {
	h := w.Header()
	switch f.Kind {
	case PrimaryRateLimit:
		reset := f.Reset
		if reset.IsZero() {
			reset = s.opts.Now().Add(time.Hour)
		}
		h.Set("X-RateLimit-Remaining", "0")
		h.Set("X-RateLimit-Used", "5000")
		h.Set("X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
		writeJSON(w, http.StatusForbidden, obj{"message": "API rate limit exceeded for user ID 1.",
			"documentation_url": "https://docs.github.com/rest/overview/resources-in-the-rest-api#rate-limiting"})
	case SecondaryRateLimit:
		h.Set("Retry-After", retryAfter(f.RetryAfter))
		writeJSON(w, http.StatusForbidden, obj{
			"message":           "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
			"documentation_url": "https://docs.github.com/rest/overview/resources-in-the-rest-api#secondary-rate-limits"})
	case TooManyRequests:
		h.Set("Retry-After", retryAfter(f.RetryAfter))
		writeJSON(w, http.StatusTooManyRequests, obj{"message": "Too Many Requests", "documentation_url": docsURL})
	default:
		status := f.Status
		if status == 0 {
			status = http.StatusBadGateway
		}
		writeJSON(w, status, obj{"message": "Server Error"})
	}
}

// retryAfter renders a Retry-After in whole seconds, rounded up.
func retryAfter(d time.Duration) string {
	if d <= 0 {
		d = time.Minute
	}
	return strconv.Itoa(int(math.Ceil(d.Seconds())))
}
