package githubemu

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"
)

// HookID is the X-GitHub-Hook-ID of every delivery.
const HookID = 424242

// zeroSHA is what push events carry for a ref that did not or no longer
// exists.
const zeroSHA = "0000000000000000000000000000000000000000"

// Delivery is one webhook delivery: the event, the raw payload and the
// headers GitHub sends with it (signed when the server has a secret).
type Delivery struct {
	ID      string
	Event   string
	Payload []byte
	Header  http.Header
}

// DeliveryResult is the receiver's answer to a delivery.
type DeliveryResult struct {
	Delivery
	Status int
	Body   []byte
}

// Sign computes the X-Hub-Signature-256 and X-Hub-Signature values GitHub
// sends for body: "sha256=<hex HMAC-SHA256>" and "sha1=<hex HMAC-SHA1>".
func Sign(secret string, body []byte) (sig256, sig1 string) {
	m256 := hmac.New(sha256.New, []byte(secret))
	m256.Write(body)
	m1 := hmac.New(sha1.New, []byte(secret))
	m1.Write(body)
	return "sha256=" + hex.EncodeToString(m256.Sum(nil)), "sha1=" + hex.EncodeToString(m1.Sum(nil))
}

// NewDelivery prepares a delivery of payload as event with a fresh
// delivery id and GitHub's headers.
func (s *Server) NewDelivery(event string, payload []byte) Delivery {
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("User-Agent", "GitHub-Hookshot/044aadd")
	h.Set("X-GitHub-Event", event)
	h.Set("X-GitHub-Hook-ID", strconv.Itoa(HookID))
	h.Set("X-GitHub-Hook-Installation-Target-Type", "repository")
	h.Set("X-GitHub-Hook-Installation-Target-ID", "1")
	id := newUUID()
	h.Set("X-GitHub-Delivery", id)
	if s.opts.WebhookSecret != "" {
		sig256, sig1 := Sign(s.opts.WebhookSecret, payload)
		h.Set("X-Hub-Signature-256", sig256)
		h.Set("X-Hub-Signature", sig1)
	}
	return Delivery{ID: id, Event: event, Payload: payload, Header: h}
}

// Deliver posts payload as event to url, signed like GitHub.
func (s *Server) Deliver(url, event string, payload []byte) (*DeliveryResult, error) {
	return s.Redeliver(url, s.NewDelivery(event, payload))
}

// Redeliver posts d again, with the same delivery id (GitHub's "Redeliver").
func (s *Server) Redeliver(url string, d Delivery) (*DeliveryResult, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(d.Payload))
	if err != nil {
		return nil, err
	}
	req.Header = d.Header.Clone()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return &DeliveryResult{Delivery: d, Status: resp.StatusCode, Body: body}, err
}

// newUUID returns a random (version 4) UUID, the form of X-GitHub-Delivery.
func newUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// PullRequestEvent builds a pull_request payload for pull request n with
// action (opened, synchronize, reopened, edited, closed...) from GitHub's
// example for the pull request's state. The sender is its author.
func (r *Repo) PullRequestEvent(action string, n int) ([]byte, error) {
	return r.pullRequestEvent(action, n, "")
}

// BaseEditedEvent builds the pull_request "edited" payload GitHub sends
// when the base branch of pull request n changed from fromBase.
func (r *Repo) BaseEditedEvent(n int, fromBase string) ([]byte, error) {
	return r.pullRequestEvent("edited", n, fromBase)
}

// pullRequestEvent builds a pull_request payload.
func (r *Repo) pullRequestEvent(action string, n int, fromBase string) (out []byte, err error) {
	r.with(func(rp *repo) {
		p := rp.pulls[n]
		if p == nil {
			err = fmt.Errorf("githubemu: no pull request %d", n)
			return
		}
		o := r.s.shape("webhooks", pullTemplate(action, p), rp)
		o["action"], o["number"] = action, p.Number
		r.s.fillPull(child(o, "pull_request"), p, rp)
		if action == "synchronize" {
			o["before"], o["after"] = fakeSHA("before", p.HeadSHA), p.HeadSHA
		}
		if fromBase != "" {
			o["changes"] = obj{"base": obj{"ref": obj{"from": fromBase}, "sha": obj{"from": fakeSHA("base", fromBase)}}}
		}
		r.s.setRepo(child(o, "repository"), rp)
		r.s.setUser(child(o, "sender"), p.Author)
		out, err = json.Marshal(o)
	})
	return out, err
}

// pullTemplate picks the example closest to the pull request's state.
func pullTemplate(action string, p *Pull) string {
	switch {
	case p.Merged:
		return "pull_request.closed.merged"
	case p.State == "closed":
		return "pull_request.closed"
	case action == "synchronize":
		return "pull_request.synchronize"
	}
	return "pull_request.opened"
}

// CommentEvent adds a comment by user on pull request n, as if written on
// the web, and builds the issue_comment "created" payload GitHub sends
// for it. It returns the payload and the comment's id.
func (r *Repo) CommentEvent(n int, user, body string) (out []byte, id int64, err error) {
	r.with(func(rp *repo) {
		p := rp.pulls[n]
		if p == nil {
			err = fmt.Errorf("githubemu: no pull request %d", n)
			return
		}
		c := r.s.addComment(rp, n, user, body)
		id = c.ID
		o := r.s.shape("webhooks", "issue_comment.created.on-pull-request", rp)
		r.s.fillIssue(child(o, "issue"), p, rp)
		co := child(o, "comment")
		for k, v := range r.s.commentObject(c, rp) {
			if _, known := co[k]; known {
				co[k] = v
			}
		}
		r.s.setRepo(child(o, "repository"), rp)
		r.s.setUser(child(o, "sender"), user)
		out, err = json.Marshal(o)
	})
	return out, id, err
}

// fillIssue makes the issue object of an issue_comment payload describe
// pull request p.
func (s *renderer) fillIssue(o obj, p *Pull, rp *repo) {
	if o == nil {
		return
	}
	num := strconv.Itoa(p.Number)
	html := s.URL() + "/" + rp.full() + "/pull/" + num
	api := s.APIURL() + "repos/" + rp.full()
	o["number"], o["id"], o["title"], o["body"], o["state"] = p.Number, p.ID, p.Title, p.Body, p.State
	o["html_url"], o["url"], o["comments_url"] = html, api+"/issues/"+num, api+"/issues/"+num+"/comments"
	o["comments"] = countComments(rp, p.Number)
	s.setUser(child(o, "user"), p.Author)
	o["pull_request"] = obj{"url": api + "/pulls/" + num, "html_url": html, "diff_url": html + ".diff",
		"patch_url": html + ".patch", "merged_at": stampOrNil(p.MergedAt)}
}

// PushEvent builds a push payload for branch moving from before to after
// (zeroSHA before: created; zeroSHA after: deleted).
func (r *Repo) PushEvent(branch, before, after string) (out []byte, err error) {
	r.with(func(rp *repo) {
		o := r.s.shape("webhooks", "push", rp)
		o["ref"], o["before"], o["after"] = "refs/heads/"+branch, before, after
		o["created"], o["deleted"], o["forced"] = before == zeroSHA, after == zeroSHA, false
		o["compare"] = r.s.URL() + "/" + rp.full() + "/compare/" + short(before) + "..." + short(after)
		if after == zeroSHA {
			o["head_commit"], o["commits"] = nil, []any{}
		} else if hc := child(o, "head_commit"); hc != nil {
			hc["id"], hc["url"] = after, r.s.URL()+"/"+rp.full()+"/commit/"+after
			o["commits"] = []any{hc}
		}
		r.s.setRepo(child(o, "repository"), rp)
		r.s.setUser(child(o, "sender"), rp.owner)
		o["pusher"] = obj{"name": rp.owner, "email": rp.owner + "@users.noreply.github.com"}
		out, err = json.Marshal(o)
	})
	return out, err
}

// short is the 12-character prefix of a SHA that compare URLs use.
func short(sha string) string { return sha[:min(len(sha), 12)] }

// PingEvent builds the ping payload GitHub sends when a hook is created.
// There is no upstream example; the fields follow GitHub's documentation.
func (r *Repo) PingEvent(hookURL string) (out []byte, err error) {
	r.with(func(rp *repo) {
		base := r.s.shape("webhooks", "pull_request.opened", rp)
		api := r.s.APIURL() + "repos/" + rp.full() + "/hooks/" + strconv.Itoa(HookID)
		now := stamp(r.s.opts.Now())
		o := obj{"zen": "Design for failure.", "hook_id": HookID, "hook": obj{
			"type": "Repository", "id": HookID, "name": "web", "active": true,
			"events":     []string{"issue_comment", "pull_request", "push"},
			"config":     obj{"content_type": "json", "insecure_ssl": "0", "url": hookURL},
			"updated_at": now, "created_at": now, "url": api, "test_url": api + "/test",
			"ping_url": api + "/pings", "deliveries_url": api + "/deliveries",
			"last_response": obj{"code": nil, "status": "unused", "message": nil},
		}, "repository": base["repository"], "sender": base["sender"]}
		r.s.setRepo(child(o, "repository"), rp)
		out, err = json.Marshal(o)
	})
	return out, err
}
