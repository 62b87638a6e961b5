package forge

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/google/go-github/v60/github"
)

// Backoff for 5xx and transport errors: base, doubled per attempt, capped.
const (
	backoffBase = 500 * time.Millisecond
	backoffCap  = 8 * time.Second
	// defaultLimitWait is assumed when a rate limit names no time.
	defaultLimitWait = time.Minute
)

// attemptFunc is one try of a call, on a fresh go-github client.
type attemptFunc func(gh *github.Client) (*github.Response, error)

// outcome is a classified failure.
type outcome struct {
	err error // returned when not retrying
	// wait > 0 means trying again after it may succeed.
	wait time.Duration
	// limit is set for rate limits: GitHub refused before doing anything,
	// so even a non-idempotent request may be sent again.
	limit *ErrRateLimited
}

// call runs try until it succeeds, fails for good, runs out of attempts,
// or would have to wait longer than MaxWait. Only idempotent calls are
// repeated after a failure that may have reached GitHub (5xx, a lost
// connection); rate limits are repeated for every call.
func (c *Client) call(ctx context.Context, op string, idempotent bool, try attemptFunc) error {
	for attempt := 1; ; attempt++ {
		if err := c.waitGate(ctx, op); err != nil {
			return err
		}
		resp, err := try(c.gh())
		if err == nil {
			c.noteRate(op, resp)
			return nil
		}
		if ctx.Err() != nil {
			return errContext(op, ctx.Err())
		}
		o := c.classify(op, resp, err, attempt)
		if o.limit != nil {
			c.closeGate(*o.limit)
		}
		if o.wait <= 0 || attempt >= c.cfg.MaxAttempts || (!idempotent && o.limit == nil) || o.wait > c.cfg.MaxWait {
			return o.err
		}
		c.log.Debug("retrying GitHub call", "op", op, "attempt", attempt, "wait", o.wait, "error", o.err.Error())
		if err := c.cfg.Sleep(ctx, o.wait); err != nil {
			return errContext(op, err)
		}
	}
}

// classify turns go-github's error into an outcome.
func (c *Client) classify(op string, resp *github.Response, err error, attempt int) outcome {
	now := c.cfg.Now()
	var rl *github.RateLimitError
	var ab *github.AbuseRateLimitError
	var er *github.ErrorResponse
	switch {
	case errors.As(err, &rl):
		return c.limited(op, "primary", orLater(rl.Rate.Reset.Time, now))
	case errors.As(err, &ab):
		wait := defaultLimitWait
		if ab.RetryAfter != nil {
			wait = *ab.RetryAfter
		}
		return c.limited(op, "secondary", now.Add(wait))
	case errors.As(err, &er) && er.Response != nil && er.Response.StatusCode == http.StatusTooManyRequests:
		return c.limited(op, "429", now.Add(retryAfter(er.Response.Header, now)))
	case errors.As(err, &er) && er.Response != nil:
		status := er.Response.StatusCode
		msg := c.scrub(describe(er))
		o := outcome{err: &Error{Op: op, Status: status, Kind: kindOf(status, msg), Message: msg}}
		if status >= 500 {
			o.wait = c.backoff(attempt)
		}
		return o
	}
	// No GitHub answer (connection, timeout, undecodable body): retry.
	return outcome{err: &Error{Op: op, Kind: ErrUnavailable, Message: c.scrub(err.Error())}, wait: c.backoff(attempt)}
}

// limited is the outcome of a rate limit lasting until until.
func (c *Client) limited(op, limit string, until time.Time) outcome {
	rl := &ErrRateLimited{Op: op, Until: until, Limit: limit}
	wait := until.Sub(c.cfg.Now())
	return outcome{err: rl, limit: rl, wait: max(wait, 0) + c.cfg.Jitter(time.Second) + time.Millisecond}
}

// orLater is t, or a default wait from now when GitHub named no time.
func orLater(t, now time.Time) time.Time {
	if t.IsZero() {
		return now.Add(defaultLimitWait)
	}
	return t
}

// retryAfter reads how long a 429 asks to wait: Retry-After (seconds or
// an HTTP date), else X-RateLimit-Reset when nothing remains, else a
// minute. go-github v60 does not read them for 429.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if v := h.Get("Retry-After"); v != "" {
		if secs, err := strconv.Atoi(v); err == nil && secs >= 0 {
			return time.Duration(secs) * time.Second
		}
		if t, err := http.ParseTime(v); err == nil {
			return max(t.Sub(now), 0)
		}
	}
	if h.Get("X-RateLimit-Remaining") == "0" {
		if reset, err := strconv.ParseInt(h.Get("X-RateLimit-Reset"), 10, 64); err == nil {
			return max(time.Unix(reset, 0).Sub(now), 0)
		}
	}
	return defaultLimitWait
}

// backoff is the wait before attempt+1: exponential, capped, with half of
// it random so that many callers do not retry in step.
func (c *Client) backoff(attempt int) time.Duration {
	d := backoffBase << min(attempt-1, 10)
	d = min(d, backoffCap, c.cfg.MaxWait)
	return d/2 + c.cfg.Jitter(d/2)
}

// closeGate makes calls wait for, or fail with, a rate limit until it ends.
func (c *Client) closeGate(rl ErrRateLimited) {
	c.gateMu.Lock()
	defer c.gateMu.Unlock()
	if rl.Until.After(c.gate.Until) {
		c.gate = rl
	}
}

// noteRate closes the gate when a successful answer says the quota is
// spent, so the next call does not earn a 403.
func (c *Client) noteRate(op string, resp *github.Response) {
	if resp == nil || resp.Rate.Limit == 0 || resp.Rate.Remaining > 0 {
		return
	}
	if reset := resp.Rate.Reset.Time; reset.After(c.cfg.Now()) {
		c.closeGate(ErrRateLimited{Op: op, Until: reset, Limit: "primary"})
	}
}

// waitGate lets a call through when no rate limit is in force, waits for
// a short one, and fails with ErrRateLimited for a long one, without
// sending anything.
func (c *Client) waitGate(ctx context.Context, op string) error {
	c.gateMu.Lock()
	gate := c.gate
	c.gateMu.Unlock()
	wait := gate.Until.Sub(c.cfg.Now())
	if wait <= 0 {
		return nil
	}
	if wait > c.cfg.MaxWait {
		return &ErrRateLimited{Op: op, Until: gate.Until, Limit: gate.Limit}
	}
	c.log.Debug("waiting for a GitHub rate limit", "op", op, "limit", gate.Limit, "wait", wait)
	if err := c.cfg.Sleep(ctx, wait+c.cfg.Jitter(time.Second)); err != nil {
		return errContext(op, err)
	}
	return nil
}
