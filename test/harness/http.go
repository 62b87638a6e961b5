package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Client talks HTTP to nodes; every request is bounded by its timeout.
type Client struct {
	HTTP *http.Client
	// Token, if set, is sent as "Authorization: Bearer <Token>" (the
	// nodes' [api] token_env).
	Token string
	// LeaderWait bounds DoRetry's wait for a leader (DefaultLeaderWait
	// when zero).
	LeaderWait time.Duration
}

// NewClient returns a client whose requests time out after timeout;
// maxIdlePerHost > 0 sets the transport's MaxIdleConnsPerHost (for load).
func NewClient(timeout time.Duration, maxIdlePerHost int) *Client {
	c := &http.Client{Timeout: timeout}
	if maxIdlePerHost > 0 {
		c.Transport = &http.Transport{MaxIdleConns: 4 * maxIdlePerHost, MaxIdleConnsPerHost: maxIdlePerHost,
			IdleConnTimeout: 30 * time.Second, DisableCompression: true}
	}
	return &Client{HTTP: c}
}

// Do sends body (none if empty) to url and returns the status code and
// the response body. Every method but GET and HEAD sends Content-Type
// application/json: the API refuses writes of any other type.
func (c *Client) Do(method, url, body string) (int, []byte, error) {
	return c.do(context.Background(), method, url, body)
}

func (c *Client) do(ctx context.Context, method, url, body string) (int, []byte, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	if method != http.MethodGet && method != http.MethodHead {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.HTTP.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return resp.StatusCode, data, err
}

// Get is Do with GET and no body.
func (c *Client) Get(url string) (int, []byte, error) { return c.Do(http.MethodGet, url, "") }

// GetJSON GETs url and decodes a 200 answer into v.
func (c *Client) GetJSON(url string, v any) error {
	return c.Call(context.Background(), http.MethodGet, url, "", http.StatusOK, v)
}

// Call sends a JSON body (none if empty) to url and decodes the answer
// into out when out is not nil. An answer with another status than want
// is an *HTTPError.
func (c *Client) Call(ctx context.Context, method, url, body string, want int, out any) error {
	code, data, err := c.do(ctx, method, url, body)
	if err != nil {
		return err
	}
	if code != want {
		return &HTTPError{Code: code, Body: string(data)}
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			return fmt.Errorf("decode %s %s: %w: %.300s", method, url, err, data)
		}
	}
	return nil
}

// Status GETs n's /v1/status.
func (c *Client) Status(n *Node) (Status, error) {
	var s Status
	err := c.GetJSON(n.Base()+"/v1/status", &s)
	return s, err
}

// Generation GETs n's /v1/generations/{gen}.
func (c *Client) Generation(n *Node, gen uint64) (*Generation, error) {
	var g Generation
	return &g, c.GetJSON(fmt.Sprintf("%s/v1/generations/%d", n.Base(), gen), &g)
}

// Generations GETs n's /v1/generations.
func (c *Client) Generations(n *Node) ([]Generation, error) {
	var l struct {
		Generations []Generation `json:"generations"`
	}
	return l.Generations, c.GetJSON(n.Base()+"/v1/generations", &l)
}

// Ready returns nil when n's /readyz answers 200.
func (c *Client) Ready(n *Node) error {
	return c.Call(context.Background(), http.MethodGet, n.Base()+"/readyz", "", http.StatusOK, nil)
}

// Reconcile asks n to reconcile now (a follower forwards to the leader),
// waiting out an election (DoRetry: a pass more is harmless), and expects
// 202.
func (c *Client) Reconcile(n *Node) error {
	code, data, err := c.DoRetry(http.MethodPost, n.Base()+"/v1/cluster:reconcile", "{}")
	if err == nil && code != http.StatusAccepted {
		err = &HTTPError{Code: code, Body: string(data)}
	}
	return err
}

// Evaluate asks n for one decision of policy on the request body.
func (c *Client) Evaluate(ctx context.Context, n *Node, policy, body string) (*Decision, error) {
	var d Decision
	return &d, c.Call(ctx, http.MethodPost, n.Base()+"/v1/policies/"+policy+":evaluate", body, http.StatusOK, &d)
}

// EvaluatePinned is Evaluate pinned to generation gen.
func (c *Client) EvaluatePinned(n *Node, gen uint64, policy, body string) (*Decision, error) {
	var d Decision
	url := fmt.Sprintf("%s/v1/generations/%d/policies/%s:evaluate", n.Base(), gen, policy)
	return &d, c.Call(context.Background(), http.MethodPost, url, body, http.StatusOK, &d)
}

// Probe asks n for the decision of ProbeRequest on Policy.
func (c *Client) Probe(n *Node) (*Decision, error) {
	d, err := c.Evaluate(context.Background(), n, Policy, ProbeRequest)
	if err != nil {
		err = fmt.Errorf("%s: %w", n.ID, err)
	}
	return d, err
}

// Metric reads one unlabelled series from n's /metrics.
func (c *Client) Metric(n *Node, name string) (float64, error) {
	code, body, err := c.Get(n.Base() + "/metrics")
	if err == nil && code != http.StatusOK {
		err = &HTTPError{Code: code, Body: string(body)}
	}
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			var f float64
			_, err := fmt.Sscan(v, &f)
			return f, err
		}
	}
	return 0, fmt.Errorf("%s: no series %s", n.ID, name)
}

// Fetch is Do that decodes a JSON answer of any status into out (when out
// is not nil and the answer has a body) and fails the test on a transport
// or decoding error; it returns the status code for the test to check.
func (c *Client) Fetch(t testing.TB, method, url, body string, out any) int {
	t.Helper()
	code, data, err := c.do(context.Background(), method, url, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: %d: %v: %.300s", method, url, code, err, data)
		}
	}
	return code
}
