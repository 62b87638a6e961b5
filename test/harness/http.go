package harness

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Client talks HTTP to nodes; every request is bounded by its timeout.
type Client struct {
	HTTP *http.Client
	// Token, if set, is sent as "Authorization: Bearer <Token>" (the
	// nodes' [api] token_env).
	Token string
}

// NewClient returns a client whose requests time out after timeout;
// maxIdlePerHost > 0 sets the transport's MaxIdleConnsPerHost (for load).
func NewClient(timeout time.Duration, maxIdlePerHost int) *Client {
	c := &http.Client{Timeout: timeout}
	if maxIdlePerHost > 0 {
		c.Transport = &http.Transport{MaxIdleConnsPerHost: maxIdlePerHost}
	}
	return &Client{HTTP: c}
}

// Do sends body (none if empty) to url and returns the status code and
// the response body.
func (c *Client) Do(method, url, body string) (int, []byte, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return 0, nil, err
	}
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	if method != http.MethodGet && method != http.MethodHead {
		req.Header.Set("Content-Type", "application/json") // the API refuses writes of any other type
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
	code, body, err := c.Get(url)
	if err != nil {
		return err
	}
	if code != 200 {
		return fmt.Errorf("GET %s: %d %s", url, code, body)
	}
	return json.Unmarshal(body, v)
}
