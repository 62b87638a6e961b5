// Package githubemu is an in-process GitHub for tests: an httptest server
// that answers the REST calls the reconciler makes with the shapes GitHub
// really sends (built from GitHub's own examples, see shapes/), checks what
// go-github really sends, keeps the state those calls change, injects
// faults (5xx, primary and secondary rate limits, 429) and delivers signed
// webhooks. See DESIGN.md for what it models and what it leaves out.
package githubemu

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"time"
)

// DefaultPrefix is where the REST API is served unless Options.Prefix says
// otherwise: the GitHub Enterprise layout, the only one a loopback server
// can offer (github.com's API lives on its own host, api.github.com).
const DefaultPrefix = "/api/v3"

// APIVersion is the X-GitHub-Api-Version the emulator accepts (go-github v60
// sends it on every request).
const APIVersion = "2022-11-28"

// docsURL is the documentation_url of error bodies.
const docsURL = "https://docs.github.com/rest"

// maxRequestBody bounds what the emulator reads of a request.
const maxRequestBody = 4 << 20

// Options configure a Server. The zero value is usable.
type Options struct {
	// Token is the token every REST request must carry, as
	// "Authorization: Bearer <token>" or "token <token>". Empty accepts
	// requests without checking.
	Token string
	// Prefix is the path prefix of the REST API: DefaultPrefix when empty,
	// "/" for the server root.
	Prefix string
	// WebhookSecret signs deliveries; empty sends them unsigned, as GitHub
	// does for a hook without a secret.
	WebhookSecret string
	// BotLogin authors the comments, statuses and pull requests made
	// through the API. Default "reconciler[bot]".
	BotLogin string
	// Now is the emulator's clock (timestamps, rate-limit resets).
	Now func() time.Time
}

// Server is the emulator. Create it with New, set state up through Repo
// handles, point the client at APIURL, and Close it at the end.
//
// Server itself is the request pipeline (prefix, recording, faults,
// authentication, headers) and the test-facing API; the state lives in the
// store, the answers' shapes in the renderer, and each resource family has
// its own handler type (pulls.go, issues.go, repos.go, checks.go).
type Server struct {
	*store    // the repositories and the emulator's one lock
	*renderer // GitHub's example shapes, pointed at this server
	prefix    string
	srv       *httptest.Server
	mux       *http.ServeMux

	// Guarded by store.mu.
	faults   []*Fault
	requests []Request
	used     int // requests counted against the rate limit
}

// Request is one REST request as the emulator received it, for assertions.
// The Authorization header is replaced by its scheme alone.
type Request struct {
	Method string
	Path   string // without the prefix
	Query  string
	Header http.Header
	Body   []byte
}

// New starts an emulator on a loopback port.
func New(opts Options) *Server {
	if opts.BotLogin == "" {
		opts.BotLogin = "reconciler[bot]"
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Server{store: newStore(opts), prefix: normPrefix(opts.Prefix)}
	s.renderer = newRenderer(s)
	s.mux = http.NewServeMux()
	s.routes()
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	return s
}

// normPrefix turns Options.Prefix into "" (root) or "/x/y" (no trailing slash).
func normPrefix(p string) string {
	if p == "" {
		return DefaultPrefix
	}
	return "/" + strings.Trim(p, "/")
}

// Close shuts the server down.
func (s *Server) Close() { s.srv.Close() }

// URL is the server's root, e.g. http://127.0.0.1:PORT (no trailing slash).
func (s *Server) URL() string { return s.srv.URL }

// APIURL is the REST base, with a trailing slash: what a client's BaseURL
// must be.
func (s *Server) APIURL() string { return strings.TrimSuffix(s.srv.URL+s.prefix, "/") + "/" }

// Client is an http.Client for the server.
func (s *Server) Client() *http.Client { return s.srv.Client() }

// OnMerge sets a hook run on every successful merge, before the pull
// request is marked merged; it may push the merge to a real git server and
// return the merge commit's SHA ("" lets the emulator make one up). An error
// fails the merge with a 500.
func (s *Server) OnMerge(hook func(MergeRequest) (string, error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onMerge = hook
}

// Requests returns the REST requests received so far, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// ResetRequests forgets the recorded requests.
func (s *Server) ResetRequests() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = nil
}

// serve is the pipeline every request goes through: prefix, record, faults,
// authentication, headers, then the route.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	if !s.stripPrefix(r) {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxRequestBody))
	if err != nil {
		writeError(w, http.StatusBadRequest, "Problems reading the request body")
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	f := s.record(r, body)
	s.rateHeaders(w)
	if f != nil && !f.AfterHandling {
		s.writeFault(w, f)
		return
	}
	if !s.checkHeaders(w, r) {
		return
	}
	if f != nil {
		// Apply the request, lose the answer: what a client sees when a
		// proxy times out after GitHub did the work.
		s.route(httptest.NewRecorder(), r)
		s.writeFault(w, f)
		return
	}
	s.route(w, r)
}

// stripPrefix removes the API prefix from r's path; false when absent.
func (s *Server) stripPrefix(r *http.Request) bool {
	if s.prefix == "/" {
		return true
	}
	rest, ok := strings.CutPrefix(r.URL.Path, s.prefix)
	if !ok || !strings.HasPrefix(rest, "/") {
		return false
	}
	r.URL.Path = rest
	if r.URL.RawPath != "" {
		r.URL.RawPath = strings.TrimPrefix(r.URL.RawPath, s.prefix)
	}
	return true
}

// record logs r and takes the fault, if any, that answers it.
func (s *Server) record(r *http.Request, body []byte) *Fault {
	h := r.Header.Clone()
	if a := h.Get("Authorization"); a != "" {
		scheme, _, _ := strings.Cut(a, " ")
		h.Set("Authorization", scheme+" REDACTED")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.used++
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, Header: h, Body: body})
	return s.takeFault(r)
}

// rateHeaders sends the X-RateLimit headers GitHub puts on every answer.
func (s *Server) rateHeaders(w http.ResponseWriter) {
	s.mu.Lock()
	used := s.used
	s.mu.Unlock()
	h := w.Header()
	h.Set("X-RateLimit-Limit", "5000")
	h.Set("X-RateLimit-Remaining", strconv.Itoa(max(0, 5000-used)))
	h.Set("X-RateLimit-Used", strconv.Itoa(used))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(s.opts.Now().Add(time.Hour).Unix(), 10))
	h.Set("X-RateLimit-Resource", "core")
	h.Set("X-GitHub-Media-Type", "github.v3; format=json")
}

// checkHeaders answers like GitHub when the token, Accept or API version is
// wrong; true when the request may proceed.
func (s *Server) checkHeaders(w http.ResponseWriter, r *http.Request) bool {
	if s.opts.Token != "" && !validAuth(r.Header.Get("Authorization"), s.opts.Token) {
		writeError(w, http.StatusUnauthorized, "Bad credentials")
		return false
	}
	if !acceptable(r.Header.Get("Accept")) {
		writeError(w, http.StatusUnsupportedMediaType, "Unsupported 'Accept' header: "+strconv.Quote(r.Header.Get("Accept")))
		return false
	}
	if v := r.Header.Get("X-GitHub-Api-Version"); v != "" && v != APIVersion {
		writeError(w, http.StatusBadRequest, "API version "+v+" is not supported.")
		return false
	}
	if len(bodyOf(r)) > 0 && !strings.HasPrefix(r.Header.Get("Content-Type"), "application/json") {
		writeError(w, http.StatusUnsupportedMediaType, "Content-Type must be application/json")
		return false
	}
	return true
}

// validAuth accepts "Bearer <token>" and "token <token>" (GitHub takes both).
func validAuth(header, token string) bool {
	scheme, value, ok := strings.Cut(header, " ")
	if !ok || value != token {
		return false
	}
	return strings.EqualFold(scheme, "bearer") || strings.EqualFold(scheme, "token")
}

// acceptable reports whether an Accept header asks for JSON GitHub serves.
func acceptable(accept string) bool {
	if accept == "" {
		return true // GitHub defaults to its JSON
	}
	for _, part := range strings.Split(accept, ",") {
		mt := strings.TrimSpace(strings.Split(part, ";")[0])
		if strings.HasPrefix(mt, "application/vnd.github") || mt == "application/json" || mt == "*/*" {
			return true
		}
	}
	return false
}

// route hands r to the matching handler; GitHub answers unknown paths and
// methods with a JSON 404.
func (s *Server) route(w http.ResponseWriter, r *http.Request) {
	if _, pattern := s.mux.Handler(r); pattern == "" {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	s.mux.ServeHTTP(w, r)
}

// bodyOf returns the request body the pipeline buffered.
func bodyOf(r *http.Request) []byte {
	b, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(b))
	return b
}

// writeJSON sends v as JSON with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

// writeError sends GitHub's basic-error body.
func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]any{"message": msg, "documentation_url": docsURL})
}

// fieldError is one entry of a validation-error body.
type fieldError struct {
	Resource string `json:"resource"`
	Field    string `json:"field,omitempty"`
	Code     string `json:"code"`
	Message  string `json:"message,omitempty"`
}

// writeInvalid sends GitHub's 422 validation-error body.
func writeInvalid(w http.ResponseWriter, errs ...fieldError) {
	writeJSON(w, http.StatusUnprocessableEntity, map[string]any{
		"message": "Validation Failed", "documentation_url": docsURL, "errors": errs,
	})
}

// decodeBody decodes the JSON request body into v; it answers 400 like
// GitHub ("Problems parsing JSON") and returns false when it cannot.
func decodeBody(w http.ResponseWriter, r *http.Request, v any) bool {
	b := bodyOf(r)
	if len(bytes.TrimSpace(b)) == 0 {
		b = []byte("{}")
	}
	if err := json.Unmarshal(b, v); err != nil {
		writeError(w, http.StatusBadRequest, "Problems parsing JSON")
		return false
	}
	return true
}

// stamp formats a time as GitHub does.
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// stampOrNil is stamp, or JSON null for the zero time.
func stampOrNil(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return stamp(t)
}
