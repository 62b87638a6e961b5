package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/policyrollout/reconciler/internal/cluster"
)

// The CLI's one HTTP client: every command that talks to a running node
// (status, rollback, accept-history, experiments, operations, nodes, raft)
// takes the same flags through addClientFlags and sends its requests
// through apiClient, so credentials, TLS, timeouts and the printing of an
// AIP-193 error are written once.

// defaultServer is the API address of a node started with the defaults.
const defaultServer = "http://127.0.0.1:8181"

// Bounds of what the client reads from files and the network.
const (
	maxAnswerBytes   = 16 << 20 // a status of many nodes and experiments fits
	maxTokenBytes    = 4 << 10
	maxPEMBytes      = 1 << 20 // the server's own bound on its TLS files
	defaultCallLimit = 30 * time.Second
)

// clientFlags are the connection flags every remote command takes.
type clientFlags struct {
	server    string
	tokenEnv  string
	tokenFile string
	caFile    string
	certFile  string
	keyFile   string
	timeout   time.Duration
}

// addClientFlags registers the connection flags on fs; role names the
// role the command needs, for the help text, and timeout is the default
// bound of one request.
func addClientFlags(fs *flag.FlagSet, role string, timeout time.Duration) *clientFlags {
	f := &clientFlags{}
	fs.StringVar(&f.server, "server", defaultServer, "`URL` of any node's API (followers forward writes to the leader)")
	fs.StringVar(&f.tokenEnv, "token-env", "RECONCILER_TOKEN",
		"environment `VARIABLE` holding an API token ("+role+" or above), sent when set")
	fs.StringVar(&f.tokenFile, "token-file", "", "`FILE` holding the API token (instead of --token-env)")
	fs.StringVar(&f.caFile, "ca-file", "", "PEM `FILE` of the CA that signed the server's certificate (https; default: the system's, or SSL_CERT_FILE)")
	fs.StringVar(&f.certFile, "cert-file", "", "PEM `FILE` of a client certificate, for a server with [api] client_ca_file")
	fs.StringVar(&f.keyFile, "key-file", "", "PEM `FILE` of the client certificate's key")
	fs.DurationVar(&f.timeout, "timeout", timeout, "bound of each request")
	return f
}

// leaderWait bounds how long a read or an idempotent write is sent again
// while the cluster is between leaders (an election takes seconds).
var leaderWait = 30 * time.Second

// apiClient sends requests to one node's API with the caller's token.
type apiClient struct {
	base    string
	token   string
	timeout time.Duration
	http    *http.Client
	// retry sends a write again while the cluster is between leaders
	// (reads always are): set by idempotent.
	retry bool
}

// idempotent is c for a write that is harmless twice (a state change to
// a state, a health check, starting or stopping a preview, cancelling or
// waiting for an operation): a LEADERSHIP_LOST or FORWARD_FAILED answer
// can come after the leader applied it.
func (c *apiClient) idempotent() *apiClient {
	r := *c
	r.retry = true
	return &r
}

// client builds the apiClient the flags describe.
func (f *clientFlags) client() (*apiClient, error) {
	if f.timeout <= 0 || f.timeout > time.Hour {
		return nil, fmt.Errorf("--timeout %s must be between 0 and 1h", f.timeout)
	}
	token, err := f.readToken()
	if err != nil {
		return nil, err
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if tr.TLSClientConfig, err = f.tlsConfig(); err != nil {
		return nil, err
	}
	return &apiClient{
		base:    serverBase(f.server),
		token:   token,
		timeout: f.timeout,
		// A redirect would carry the token to wherever it points.
		http: &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		}},
	}, nil
}

func (f *clientFlags) readToken() (string, error) {
	if f.tokenFile == "" {
		return strings.TrimSpace(os.Getenv(f.tokenEnv)), nil
	}
	b, err := readBounded(f.tokenFile, maxTokenBytes)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

func (f *clientFlags) tlsConfig() (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if f.caFile != "" {
		pem, err := readBounded(f.caFile, maxPEMBytes)
		if err != nil {
			return nil, fmt.Errorf("--ca-file: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--ca-file %s holds no PEM certificate", f.caFile)
		}
	}
	if (f.certFile == "") != (f.keyFile == "") {
		return nil, errors.New("--cert-file and --key-file go together")
	}
	if f.certFile != "" {
		certPEM, err := readBounded(f.certFile, maxPEMBytes)
		if err != nil {
			return nil, fmt.Errorf("--cert-file: %w", err)
		}
		keyPEM, err := readBounded(f.keyFile, maxPEMBytes)
		if err != nil {
			return nil, fmt.Errorf("--key-file: %w", err)
		}
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			return nil, fmt.Errorf("--cert-file and --key-file: %w", err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}

// readBounded reads a file of at most max bytes.
func readBounded(path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, max)
	}
	return b, nil
}

// serverBase turns --server into a base URL.
func serverBase(server string) string {
	base := strings.TrimRight(server, "/")
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	return base
}

// apiError is an answer other than 200 (or 202), with the AIP-193 error
// the API sends.
type apiError struct {
	Base       string
	HTTPStatus string // "404 Not Found"
	Code       int
	Status     string // "NOT_FOUND"
	Message    string
	Reason     string // the ErrorInfo reason, "NO_LEADER"
	// remote is the answer as the cluster layer decodes it, nil when it
	// is not an API error: what says whether the cluster is between
	// leaders.
	remote *cluster.RemoteError
}

func (e *apiError) Error() string {
	if e.Status == "" {
		return fmt.Sprintf("%s answered %s: %s", e.Base, e.HTTPStatus, e.Message)
	}
	status := e.Status
	if e.Reason != "" {
		status += " (" + e.Reason + ")"
	}
	return fmt.Sprintf("%s answered %s: %s: %s%s", e.Base, e.HTTPStatus, status, e.Message, doneHint[e.Reason])
}

// doneHint says, for the reasons of a cluster between leaders, whether
// the request was done: whether running the command again is safe.
var doneHint = map[string]string{
	"NO_LEADER":       " (nothing was done: run it again once the cluster has a leader)",
	"NOT_LEADER":      " (nothing was done: run it again once the cluster has a leader)",
	"LEADERSHIP_LOST": " (it may have been done: look before running it again)",
	"FORWARD_FAILED":  " (it may have been done: look before running it again)",
}

// get sends GET base+path.
func (c *apiClient) get(ctx context.Context, path string) ([]byte, error) {
	return c.do(ctx, http.MethodGet, path, nil)
}

// post sends in as JSON to base+path.
func (c *apiClient) post(ctx context.Context, path string, in any) ([]byte, error) {
	return c.do(ctx, http.MethodPost, path, in)
}

// do is once, sent again with backoff for at most leaderWait while the
// answer says the cluster is between leaders, when the request is a read
// or c is idempotent. A refused connection is not retried: it is more
// often a wrong --server than a node restarting.
func (c *apiClient) do(ctx context.Context, method, path string, in any) ([]byte, error) {
	data, err := c.once(ctx, method, path, in)
	if !c.retry && method != http.MethodGet {
		return data, err
	}
	deadline := time.Now().Add(leaderWait)
	for pause := 200 * time.Millisecond; betweenLeaders(err) && time.Now().Add(pause).Before(deadline); pause = min(2*pause, 2*time.Second) {
		select {
		case <-ctx.Done():
			return data, err
		case <-time.After(pause):
		}
		data, err = c.once(ctx, method, path, in)
	}
	return data, err
}

// betweenLeaders reports whether err is a 503 of a cluster between leaders.
func betweenLeaders(err error) bool {
	var e *apiError
	return errors.As(err, &e) && e.Code == http.StatusServiceUnavailable && e.remote != nil && cluster.BetweenLeaders(e.remote)
}

// once sends one request within the client's timeout (or ctx's deadline,
// when sooner) and returns the body of a 2xx answer; any other answer is
// an *apiError.
func (c *apiClient) once(ctx context.Context, method, path string, in any) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var body io.Reader
	if in != nil {
		data, err := json.Marshal(in)
		if err != nil {
			return nil, fmt.Errorf("encoding the request: %w", err)
		}
		body = bytes.NewReader(data)
	}
	req, err := c.newRequest(ctx, method, path, body)
	if err != nil {
		return nil, err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return nil, fmt.Errorf("cannot reach %s: %w (is a node running there? use --server URL)", c.base, unwrapURL(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return nil, fmt.Errorf("reading the answer of %s: %w", c.base, err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, answerError(c.base, resp, data)
	}
	return data, nil
}

// newRequest builds a request to base+path with the caller's token.
func (c *apiClient) newRequest(ctx context.Context, method, path string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, fmt.Errorf("--server %q: %w", c.base, err)
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	return req, nil
}

// answerError reads an answer other than 2xx from base: its AIP-193
// error when it has one (as the cluster layer reads a node's), else its
// text.
func answerError(base string, resp *http.Response, data []byte) error {
	e := &apiError{Base: base, HTTPStatus: resp.Status, Code: resp.StatusCode, Message: strings.TrimSpace(string(data))}
	var re *cluster.RemoteError
	if errors.As(cluster.DecodeError(resp.StatusCode, data, base), &re) {
		e.Status, e.Message, e.Reason, e.remote = re.Status, re.Message, re.Reason, re
	}
	if resp.StatusCode/100 == 3 {
		e.Message = "redirected to " + resp.Header.Get("Location") + " (not followed: use that node's API address)"
	}
	if len(e.Message) > 4096 {
		e.Message = e.Message[:4096] + "…"
	}
	return e
}

// unwrapURL drops net/http's "Get URL:" prefix; the message names the
// server already.
func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// outputFlag registers --format (text or json) and its short form -o.
func outputFlag(fs *flag.FlagSet) *string {
	format := new(string)
	fs.StringVar(format, "format", "text", "output `format`: text (aligned tables) or json (the API's answer)")
	fs.StringVar(format, "o", "text", "short for --format")
	return format
}

// checkFormat refuses a --format other than text and json.
func (a *app) checkFormat(cmd, format string) bool {
	if format == "text" || format == "json" {
		return true
	}
	fmt.Fprintf(a.stderr, "reconciler %s: --format %q must be text or json\n", cmd, format)
	return false
}

// parseRemote is parse for a command with --format: a format other than
// text and json is a usage error.
func (a *app) parseRemote(fs *flag.FlagSet, args []string, min, max int, format *string) (int, bool) {
	if code, ok := a.parse(fs, args, min, max); !ok {
		return code, false
	}
	if !a.checkFormat(fs.Name(), *format) {
		return exitUsage, false
	}
	return exitOK, true
}

// remote runs one remote command's body with the client the flags
// describe, printing its error once: a usage error for bad flags, a
// check failure for anything the server or the network said.
func (a *app) remote(cmd string, f *clientFlags, body func(c *apiClient) error) int {
	c, err := f.client()
	if err != nil {
		fmt.Fprintf(a.stderr, "reconciler %s: %v\n", cmd, err)
		return exitUsage
	}
	if err := body(c); err != nil {
		fmt.Fprintf(a.stderr, "reconciler %s: %v\n", cmd, err)
		return exitCheck
	}
	return exitOK
}

// showAnswer is a whole remote verb that prints one answer: it adds the
// connection and output flags to fs (whose own flags are registered),
// parses args (min to max positional), sends the request and prints the
// answer as text, decoded into V, or as the API's JSON.
func showAnswer[V any](a *app, fs *flag.FlagSet, args []string, min, max int, role string,
	send func(c *apiClient) ([]byte, error), text func(io.Writer, *V)) int {
	cf := addClientFlags(fs, role, defaultCallLimit)
	format := outputFlag(fs)
	if code, ok := a.parseRemote(fs, args, min, max, format); !ok {
		return code
	}
	return a.remote(fs.Name(), cf, func(c *apiClient) error {
		body, err := send(c)
		if err != nil {
			return err
		}
		return printAnswer(a.stdout, *format, body, text)
	})
}

// printAnswer writes the API's answer as it came (json) or through
// text, which decodes it into v first.
func printAnswer[V any](w io.Writer, format string, body []byte, text func(io.Writer, *V)) error {
	if format == "json" {
		_, err := w.Write(body)
		return err
	}
	var v V
	if err := json.Unmarshal(body, &v); err != nil {
		return fmt.Errorf("the answer is not what this command reads: %w", err)
	}
	text(w, &v)
	return nil
}
