package system

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// client is shared by the harness and the load generators; every request
// goes to 127.0.0.1 and carries its own deadline.
var client = &http.Client{
	Timeout: 10 * time.Second, // requests carry shorter deadlines
	Transport: &http.Transport{
		MaxIdleConns:        256,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	},
}

// Num decodes a JSON number or a proto3-JSON string holding one (uint64
// fields are strings in proto3 JSON), so the tests accept both.
type Num uint64

// UnmarshalJSON implements json.Unmarshaler.
func (n *Num) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	if s == "null" || s == "" {
		*n = 0
		return nil
	}
	v, err := strconv.ParseUint(s, 10, 64)
	*n = Num(v)
	return err
}

// Status is the part of GET /v1/status the tests read.
type Status struct {
	NodeID           string         `json:"nodeId"`
	Leader           string         `json:"leader"`
	RaftState        string         `json:"raftState"`
	ActiveGeneration Num            `json:"activeGeneration"`
	ServedGeneration Num            `json:"servedGeneration"`
	Policies         []PolicyStatus `json:"policies"`
	Nodes            []NodeStatus   `json:"nodes"`
}

// PolicyStatus is one entry of Status.Policies.
type PolicyStatus struct {
	Name       string            `json:"name"`
	Etag       string            `json:"etag"`
	Conditions []json.RawMessage `json:"conditions"`
}

// NodeStatus is one entry of Status.Nodes.
type NodeStatus struct {
	ID         string `json:"id"`
	HTTPAddr   string `json:"httpAddr"`
	Generation Num    `json:"generation"`
	State      string `json:"state"`
	// Reachable: the leader heard from the node recently and waits for
	// its Ready before activating a generation.
	Reachable bool `json:"reachable"`
}

// Etags maps policy name to etag.
func (s *Status) Etags() map[string]string {
	m := make(map[string]string, len(s.Policies))
	for _, p := range s.Policies {
		m[p.Name] = p.Etag
	}
	return m
}

// Etag returns the etag of policy name ("web" or "policies/web"), or "".
func (s *Status) Etag(name string) string {
	for _, p := range s.Policies {
		if p.Name == name || p.Name == "policies/"+name {
			return p.Etag
		}
	}
	return ""
}

// Generation is GET /v1/generations/{n}.
type Generation struct {
	Generation   Num             `json:"generation"`
	Commit       string          `json:"commit"`
	State        string          `json:"state"`
	CreateTime   string          `json:"createTime"`
	ActivateTime string          `json:"activateTime"`
	ReadyNodes   json.RawMessage `json:"readyNodes"`
	Errors       json.RawMessage `json:"errors"`
}

// Activated reports whether the generation was ever the active one.
func (g *Generation) Activated() bool {
	return g.State == "ACTIVE" || g.State == "RETIRED" || !g.ActivatedAt().IsZero()
}

// ActivatedAt is activateTime parsed, zero when absent.
func (g *Generation) ActivatedAt() time.Time { return parseTime(g.ActivateTime) }

// CreatedAt is createTime parsed, zero when absent.
func (g *Generation) CreatedAt() time.Time { return parseTime(g.CreateTime) }

func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil || t.Year() <= 1 {
		return time.Time{}
	}
	return t
}

// Decision is the answer of :evaluate.
type Decision struct {
	Decision   string `json:"decision"`
	Rule       string `json:"rule"`
	Policy     string `json:"policy"`
	Etag       string `json:"etag"`
	Generation Num    `json:"generation"`
}

// HTTPError is a non-2xx answer.
type HTTPError struct {
	Code int
	Body string
}

func (e *HTTPError) Error() string {
	return fmt.Sprintf("HTTP %d: %s", e.Code, strings.TrimSpace(e.Body))
}

// call sends one request to addr and decodes a JSON answer into out (when
// not nil). Any status other than want is an *HTTPError.
func call(ctx context.Context, method, addr, path string, body []byte, want int, out any) error {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://"+addr+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != want {
		return &HTTPError{Code: resp.StatusCode, Body: string(b)}
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return fmt.Errorf("decode %s %s: %w: %.300s", method, path, err, b)
		}
	}
	return nil
}

func shortCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 5*time.Second)
}

// GetStatus reads GET /v1/status of the node at addr.
func GetStatus(addr string) (*Status, error) {
	ctx, cancel := shortCtx()
	defer cancel()
	var s Status
	return &s, call(ctx, http.MethodGet, addr, "/v1/status", nil, http.StatusOK, &s)
}

// GetGeneration reads GET /v1/generations/{n}.
func GetGeneration(addr string, n uint64) (*Generation, error) {
	ctx, cancel := shortCtx()
	defer cancel()
	var g Generation
	return &g, call(ctx, http.MethodGet, addr, fmt.Sprintf("/v1/generations/%d", n), nil, http.StatusOK, &g)
}

// ListGenerations reads GET /v1/generations.
func ListGenerations(addr string) ([]Generation, error) {
	ctx, cancel := shortCtx()
	defer cancel()
	var l struct {
		Generations []Generation `json:"generations"`
	}
	return l.Generations, call(ctx, http.MethodGet, addr, "/v1/generations", nil, http.StatusOK, &l)
}

// Ready reports whether GET /readyz answers 200.
func Ready(addr string) error {
	ctx, cancel := shortCtx()
	defer cancel()
	return call(ctx, http.MethodGet, addr, "/readyz", nil, http.StatusOK, nil)
}

// Reconcile asks the node at addr to reconcile now (forwarded to the leader).
func Reconcile(addr string) error {
	ctx, cancel := shortCtx()
	defer cancel()
	return call(ctx, http.MethodPost, addr, "/v1/cluster:reconcile", []byte("{}"), http.StatusAccepted, nil)
}

// Evaluate asks the node at addr for one decision of policy.
func Evaluate(ctx context.Context, addr, policy string, body []byte) (*Decision, error) {
	var d Decision
	return &d, call(ctx, http.MethodPost, addr, "/v1/policies/"+policy+":evaluate", body, http.StatusOK, &d)
}

// EvaluatePinned asks the node at addr for one decision of policy pinned to
// generation gen.
func EvaluatePinned(addr string, gen uint64, policy string, body []byte) (*Decision, error) {
	ctx, cancel := shortCtx()
	defer cancel()
	var d Decision
	path := fmt.Sprintf("/v1/generations/%d/policies/%s:evaluate", gen, policy)
	return &d, call(ctx, http.MethodPost, addr, path, body, http.StatusOK, &d)
}
