package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
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
	// the work was done (AppliedIndexHeader), 0 when it did not say.
	AppliedIndex uint64
}

// AppliedIndexHeader carries, on the leader's answer to a forwarded
// write, the raft index its state had reached once the work was done, so
// that the node that forwarded it can wait to have applied it too before
// it answers its client.
const AppliedIndexHeader = "X-Reconciler-Applied-Index"

// leaderPoll spaces the checks for a leader while OnLeader waits for one.
const leaderPoll = 100 * time.Millisecond

// LeaderAddr returns the HTTP address of the leader when it is another
// node that registered one.
func (c *Cluster) LeaderAddr() (string, bool) {
	id := c.Leader()
	if id == "" || id == c.cfg.NodeID {
		return "", false
	}
	n, ok := c.store.State().Nodes[id]
	return n.HTTPAddr, ok && n.HTTPAddr != ""
}

// OnLeader is the one way to run something on the leader: local runs
// here; when it answers raftstore.ErrNotLeader and ctx does not serve a
// forwarded request already (WithForwarded), call is sent once to the
// leader, waiting up to wait for one to be known. The answer is nil when
// local's result stands (its error is returned); otherwise it is the
// leader's answer, or the error of reaching it.
func (c *Cluster) OnLeader(ctx context.Context, wait time.Duration, local func(context.Context) error,
	call Call) (*Answer, error) {
	deadline := c.now().Add(wait)
	for {
		err := local(ctx)
		if !errors.Is(err, raftstore.ErrNotLeader) || IsForwarded(ctx) {
			return nil, err
		}
		if addr, ok := c.LeaderAddr(); ok {
			a, ferr := c.fwd.send(ctx, addr, call)
			if ferr != nil {
				return nil, ferr
			}
			return &a, nil
		}
		if !c.now().Before(deadline) {
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
	addr, isOther := c.LeaderAddr()
	if !isOther || IsForwarded(ctx) {
		return Answer{}, false, nil
	}
	a, err = c.fwd.send(ctx, addr, call)
	return a, true, err
}

func (c *Cluster) now() time.Time {
	if c.cfg.Now != nil {
		return c.cfg.Now()
	}
	return time.Now()
}

// send sends call once to addr (Sender.Send).
func (f *forwarder) send(ctx context.Context, addr string, call Call) (Answer, error) {
	return Sender{Self: f.self, Token: f.token, Client: f.client, Timeout: f.timeout}.Send(ctx, addr, call)
}

// Sender sends a Call to another node as the cluster layer does: marked
// forwarded by Self, with the token, over Client (where node-to-node TLS
// plugs in: Config.Client).
type Sender struct {
	Self    string
	Token   string
	Client  *http.Client
	Timeout time.Duration
}

// Send sends call once to addr, marked forwarded so the leader never
// forwards it again, within the caller's deadline (or Timeout when it has
// none), and returns the answer whatever its status. Failing to reach
// addr is ErrForward.
func (s Sender) Send(ctx context.Context, addr string, call Call) (Answer, error) {
	if _, ok := ctx.Deadline(); !ok && s.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.Timeout)
		defer cancel()
	}
	var body io.Reader
	if call.Body != nil {
		body = bytes.NewReader(call.Body)
	}
	req, err := http.NewRequestWithContext(ctx, call.Method, "http://"+addr+call.Path, body)
	if err != nil {
		return Answer{}, fmt.Errorf("%w: %s: %v", ErrForward, addr, err)
	}
	mark(req, s.Self, s.Token)
	if call.Caller {
		req.Header.Del("Authorization")
		if call.Authorization != "" {
			req.Header.Set("Authorization", call.Authorization)
		}
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
	idx, _ := strconv.ParseUint(resp.Header.Get(AppliedIndexHeader), 10, 64)
	return Answer{Status: resp.StatusCode, ContentType: resp.Header.Get("Content-Type"), Body: data, AppliedIndex: idx}, nil
}

// mark sets the headers of every node-to-node request: JSON, the node
// that forwards (self, "" when the request may be forwarded once more),
// and the token.
func mark(req *http.Request, self, token string) {
	req.Header.Set("Content-Type", "application/json")
	if self != "" {
		req.Header.Set(ForwardedHeader, self)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
}

// Err is nil for a 2xx answer, else the leader's error: a *RemoteError
// that matches the sentinel it names (errors.Is), or ErrForward for an
// answer that is not an API error.
func (a *Answer) Err() error {
	if a.Status/100 == 2 {
		return nil
	}
	return decodeError(a.Status, a.Body, "the leader")
}
