package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/policyrollout/reconciler/internal/raftstore"
)

// Call is a request of the node API that only the leader can serve:
// method, path with its query, and a JSON body (nil for none).
type Call struct {
	Method string
	Path   string
	Body   []byte
	// Caller, when true, sends Authorization (the original caller's
	// credential, "" for none) instead of the node's token: the leader
	// checks the caller's role again, and a node never lends its own
	// credential to a request it forwards.
	Caller        bool
	Authorization string
}

// Answer is the leader's answer to a forwarded Call, as it gave it
// (status, content type and body; an AIP-193 error included), for the
// API to copy back to its client.
type Answer struct {
	Status      int
	ContentType string
	Body        []byte
	// AppliedIndex is the raft index the leader's state had reached once
	// the work was done (AppliedIndexHeader), 0 when it did not say or,
	// from OnLeader, when the answer is not the leader's own (trusted).
	AppliedIndex uint64
	// From is the node id the answering server's certificate names with
	// node-to-node TLS, "" without it.
	From string
}

// leaderPoll spaces the checks for a leader while OnLeader waits for one.
const leaderPoll = 100 * time.Millisecond

// OnLeader is the one way to run something on the leader: local runs
// here; when it answers raftstore.ErrNotLeader and ctx does not serve a
// forwarded request already (WithForwarded), call is sent once to the
// leader, waiting up to wait for one to be known. The answer is nil when
// local's result stands (its error is returned); otherwise it is the
// leader's answer, or the error of reaching it. A leader's answer returns
// once this node has applied the index it reports (catchUp, bounded), so
// the write it answers is visible here.
func (c *Cluster) OnLeader(ctx context.Context, wait time.Duration, local func(context.Context) error,
	call Call) (*Answer, error) {
	deadline := c.cfg.Now().Add(wait)
	for {
		err := local(ctx)
		if !errors.Is(err, raftstore.ErrNotLeader) || IsForwarded(ctx) {
			return nil, err
		}
		if id, base, ok := c.fwd.leaderBase(); ok {
			a, ferr := c.fwd.send(ctx, base, call)
			if ferr != nil {
				return nil, ferr
			}
			a.AppliedIndex = c.fwd.trusted(a.AppliedIndex, a.From, id)
			c.fwd.catchUp(ctx, a.AppliedIndex)
			return &a, nil
		}
		if !c.cfg.Now().Before(deadline) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(leaderPoll):
		}
	}
}

// ForwardRead sends a read to the leader when it is another node, for
// what was just written there and may not be applied here yet; ok is
// false when this node leads or no leader is known.
func (c *Cluster) ForwardRead(ctx context.Context, call Call) (a Answer, ok bool, err error) {
	base, isOther := c.LeaderURL()
	if !isOther || IsForwarded(ctx) {
		return Answer{}, false, nil
	}
	a, err = c.fwd.send(ctx, base, call)
	return a, true, err
}

// send sends call once to the leader at base (Sender.Send).
func (f *forwarder) send(ctx context.Context, base string, call Call) (Answer, error) {
	return Sender{Self: f.self, Token: f.token, Client: f.client, Timeout: f.timeout, PeerTLS: f.peerTLS}.Send(ctx, base, call)
}

// Sender sends a Call to another node as the cluster layer does: marked
// forwarded by Self, over Client (where node-to-node TLS plugs in:
// Config.Client), with the caller's credential or else the node's token
// (none with PeerTLS: nodes prove who they are with their certificates).
type Sender struct {
	Self    string
	Token   string
	Client  *http.Client
	Timeout time.Duration
	PeerTLS bool
}

// Send sends call once to base ("http://host:port", or https with
// mutual TLS), marked forwarded so the leader never forwards it again,
// within the caller's deadline (or Timeout when it has none), and returns
// the answer whatever its status. Failing to reach it is ErrForward.
func (s Sender) Send(ctx context.Context, base string, call Call) (Answer, error) {
	addr := base
	if _, ok := ctx.Deadline(); !ok && s.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.Timeout)
		defer cancel()
	}
	var body io.Reader
	if call.Body != nil {
		body = bytes.NewReader(call.Body)
	}
	req, err := http.NewRequestWithContext(ctx, call.Method, base+call.Path, body)
	if err != nil {
		return Answer{}, fmt.Errorf("%w: %s: %v", ErrForward, addr, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(ForwardedHeader, s.Self)
	token := s.Token
	if s.PeerTLS {
		token = ""
	}
	auth := credential(ctx, token)
	if call.Caller {
		auth = call.Authorization // the caller's own, or none: never the node's
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := s.Client.Do(req)
	if err != nil {
		return Answer{}, fmt.Errorf("%w: forwarding to the leader at %s failed: %v", ErrForward, addr, TransportCause(err))
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return Answer{}, fmt.Errorf("%w: reading the leader's answer from %s: %v", ErrForward, addr, err)
	}
	a := Answer{Status: resp.StatusCode, ContentType: resp.Header.Get("Content-Type"), Body: data}
	a.AppliedIndex, a.From = answered(resp)
	return a, nil
}

// Err is nil for a 2xx answer, else the leader's error: a *RemoteError
// that matches the sentinel it names (errors.Is), or ErrForward for an
// answer that is not an API error.
func (a *Answer) Err() error {
	if a.Status/100 == 2 {
		return nil
	}
	return DecodeError(a.Status, a.Body, "the leader")
}
