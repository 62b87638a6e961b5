package harness

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"syscall"
	"time"
)

// DefaultLeaderWait bounds how long DoRetry waits out an election when
// the Client's LeaderWait is not set: an election of the test clusters
// takes a few seconds even on a loaded machine.
const DefaultLeaderWait = 30 * time.Second

// electionReasons are the AIP-193 ErrorInfo reasons (docs/api.md, Errors)
// of a 503 that means the cluster is between leaders: retried, it is
// answered once one is elected. refusedReasons are those of them that
// also mean nothing was done: no leader took the request.
var (
	electionReasons = map[string]bool{
		"NO_LEADER":       true, // no leader known
		"NOT_LEADER":      true, // the node asked lost leadership before proposing
		"LEADERSHIP_LOST": true, // leadership lost while the entry was in flight
		"FORWARD_FAILED":  true, // the leader a follower forwarded to did not answer
	}
	refusedReasons = map[string]bool{"NO_LEADER": true, "NOT_LEADER": true}
)

// DoRetryRefused is Do for a write that must not be done twice (a
// rollback, a create without an id): it sends again, as DoRetry does,
// only while the answer says the request was refused before any leader
// took it: a 503 NO_LEADER or NOT_LEADER, or a refused connection. A
// LEADERSHIP_LOST, a FORWARD_FAILED or a reset connection may come after
// the leader did the work, so they come back at once, for the test.
func (c *Client) DoRetryRefused(method, url, body string) (int, []byte, error) {
	return untilElected(c.LeaderWait, refused, func() (int, []byte, error) {
		return c.do(context.Background(), method, url, body)
	})
}

// DoRetry is Do for a write sent while the cluster may be electing a
// leader (under CPU load a leader steps down when it cannot contact a
// quorum in time): it retries, with backoff and for at most the Client's
// LeaderWait, only a 503 whose reason says the cluster is between leaders
// and a connection refused or reset; every other answer, a 503 for load
// or a 429 included, comes back at once, for the test to assert.
//
// Only for idempotent requests or those the API makes idempotent itself:
// a LEADERSHIP_LOST, a FORWARD_FAILED or a reset connection may come
// after the write was applied, so a retry must be harmless twice: a
// `:reconcile`, a state change to a state, a `:commit` with the
// experiment's etag (a second is refused for the etag), a create with an
// experimentId (a second is ALREADY_EXISTS), a webhook redelivered with
// its delivery id (GitHub.Deliver). Not a rollback, which would roll back
// twice, nor a create that would make a second resource.
func (c *Client) DoRetry(method, url, body string) (int, []byte, error) {
	return untilElected(c.LeaderWait, betweenLeaders, func() (int, []byte, error) {
		return c.do(context.Background(), method, url, body)
	})
}

// untilElected sends (again) while again says its answer is worth sending
// again, for at most wait (DefaultLeaderWait when zero), and returns the
// last answer.
func untilElected(wait time.Duration, again func(int, []byte, error) bool,
	send func() (int, []byte, error)) (int, []byte, error) {
	if wait <= 0 {
		wait = DefaultLeaderWait
	}
	deadline := time.Now().Add(wait)
	pause := 100 * time.Millisecond
	for {
		code, data, err := send()
		if !again(code, data, err) || time.Now().Add(pause).After(deadline) {
			return code, data, err
		}
		time.Sleep(pause)
		pause = min(2*pause, time.Second)
	}
}

// betweenLeaders reports whether an answer (or the error instead of one)
// is the cluster being between leaders.
func betweenLeaders(code int, data []byte, err error) bool {
	if err != nil {
		// A node restarting refuses; one killed mid-answer resets or
		// closes. A timeout is not retried: the request may still run.
		return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
			errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
	}
	return hasReason(code, data, electionReasons)
}

// refused reports whether an answer (or the error instead of one) says
// the request was not taken: nothing was sent, or no leader took it.
func refused(code int, data []byte, err error) bool {
	if err != nil {
		return errors.Is(err, syscall.ECONNREFUSED)
	}
	return hasReason(code, data, refusedReasons)
}

// hasReason reports whether an answer is a 503 with one of reasons.
func hasReason(code int, data []byte, reasons map[string]bool) bool {
	if code != http.StatusServiceUnavailable {
		return false
	}
	var e struct {
		Error struct {
			Details []struct {
				Reason string `json:"reason"`
			} `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal(data, &e) != nil {
		return false
	}
	for _, d := range e.Error.Details {
		if reasons[d.Reason] {
			return true
		}
	}
	return false
}
