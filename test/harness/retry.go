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
// answered once one is elected.
var electionReasons = map[string]bool{
	"NO_LEADER":       true, // no leader known
	"NOT_LEADER":      true, // the node asked lost leadership before proposing
	"LEADERSHIP_LOST": true, // leadership lost while the entry was in flight
	"FORWARD_FAILED":  true, // the leader a follower forwarded to did not answer
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
	return untilElected(c.LeaderWait, func() (int, []byte, error) {
		return c.do(context.Background(), method, url, body)
	})
}

// untilElected sends (again) while its answer says the cluster is between
// leaders, for at most wait (DefaultLeaderWait when zero), and returns
// the last answer.
func untilElected(wait time.Duration, send func() (int, []byte, error)) (int, []byte, error) {
	if wait <= 0 {
		wait = DefaultLeaderWait
	}
	deadline := time.Now().Add(wait)
	pause := 100 * time.Millisecond
	for {
		code, data, err := send()
		if !betweenLeaders(code, data, err) || time.Now().Add(pause).After(deadline) {
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
		if electionReasons[d.Reason] {
			return true
		}
	}
	return false
}
