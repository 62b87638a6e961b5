// Package webhook receives GitHub's webhooks at POST /v1/webhooks/github.
// It checks size and signature before it looks at the payload, answers
// fast, and does no work itself: a push or pull request event calls
// Trigger (the leader's reconcile loop does the rest, as after a poll), a
// "/reconciler ..." comment on a pull request becomes a Command for
// Commands. It never decides who may run a command: the consumer checks
// the author's permission through the GitHub API (forge.Permission), and
// never trusts the payload's author_association.
package webhook

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/policyrollout/reconciler/internal/errs"
)

// Path is where the handler is mounted (CONTRACT §4).
const Path = "/v1/webhooks/github"

// MaxBodyBytes is GitHub's cap on a delivery (25 MiB); larger bodies are
// refused before they are read.
const MaxBodyBytes = 25 << 20

// DefaultMaxUnverified is how many bodies are read at once before their
// signature can be checked: anyone can post, so this bounds the memory
// strangers can make the node hold (2 × 25 MiB). GitHub delivers rarely
// and small; a delivery refused while others are read is caught up by the
// next poll.
const DefaultMaxUnverified = 2

// bodyReadTimeout bounds the time one body may take to arrive, so that a
// slow sender cannot keep a slot for unverified bodies.
const bodyReadTimeout = 30 * time.Second

// Trigger asks the reconcile loop to run soon. It must not block: a
// follower's wiring forwards it to the leader, the leader coalesces it.
type Trigger interface {
	Trigger(reason string)
}

// Commands takes comment commands. Enqueue must not block; the consumer
// checks the author's permission (forge.Permission + forge.CanWrite)
// before acting.
type Commands interface {
	Enqueue(Command)
}

// Config is what New needs.
type Config struct {
	// Secret is the webhook secret. Empty refuses every delivery (503).
	Secret []byte
	// Branch, when set, limits push events to that branch and pull
	// request events to those into it (or moved away from it).
	Branch string
	// Repository, when set ("owner/name"), ignores deliveries for others.
	Repository string
	Trigger    Trigger
	Commands   Commands
	// Logger gets a line per refused delivery; none when nil.
	Logger hclog.Logger
	// MaxBodyBytes overrides MaxBodyBytes (tests).
	MaxBodyBytes int64
	// MaxUnverified overrides DefaultMaxUnverified.
	MaxUnverified int
	// RememberDeliveries is how many delivery ids are kept to ignore
	// redeliveries (default 1024).
	RememberDeliveries int
}

// Handler is the webhook endpoint.
type Handler struct {
	cfg  Config
	log  hclog.Logger
	seen *recent
	// slots holds a token per body being read and verified.
	slots chan struct{}
}

// New returns the handler. With no secret it logs once that every
// delivery will be refused.
func New(cfg Config) *Handler {
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = MaxBodyBytes
	}
	if cfg.MaxUnverified <= 0 {
		cfg.MaxUnverified = DefaultMaxUnverified
	}
	if cfg.RememberDeliveries <= 0 {
		cfg.RememberDeliveries = 1024
	}
	if len(cfg.Secret) == 0 {
		cfg.Logger.Error("GitHub webhook secret is empty: every delivery will be refused; set the variable github.webhook_secret_env names")
	}
	return &Handler{cfg: cfg, log: cfg.Logger, seen: newRecent(cfg.RememberDeliveries),
		slots: make(chan struct{}, cfg.MaxUnverified)}
}

// ServeHTTP serves Receive on its own (tests, a receiver without the
// API): a refusal is answered with its HTTP status and no body, since
// error bodies are the HTTP edge's (internal/api).
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := h.Receive(w, r); err != nil {
		status := http.StatusInternalServerError
		var e *errs.Error
		if errors.As(err, &e) {
			status = e.HTTPStatus()
		}
		w.WriteHeader(status)
	}
}

// Receive checks, in order: method, secret configured, size, a well
// formed signature header, a free slot for an unverified body; then it
// reads the body while hashing it, checks the signature, and only then
// parses the payload and routes the event. It writes the
// answer of a delivery it handled; a refusal is returned as an error with
// its code, for the HTTP edge to answer (AIP-193, internal/api).
func (h *Handler) Receive(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		return errs.MethodNotAllowed("use POST")
	}
	if len(h.cfg.Secret) == 0 {
		return errs.Errorf(errs.Unavailable, "webhook secret not configured")
	}
	if r.ContentLength > h.cfg.MaxBodyBytes {
		return errs.TooLarge("payload too large")
	}
	want, why := parseSignature(r.Header.Get("X-Hub-Signature-256"))
	if why != "" {
		return h.refuse(r, why)
	}
	select {
	case h.slots <- struct{}{}:
		defer func() { <-h.slots }()
	default:
		w.Header().Set("Retry-After", "5")
		return errs.Errorf(errs.Unavailable, "too many deliveries being verified; retry later")
	}
	body, sum, err := h.readHashed(w, r)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return errs.TooLarge("payload too large")
		}
		return errs.Errorf(errs.InvalidArgument, "could not read the payload")
	}
	if !hmac.Equal(want, sum) {
		return h.refuse(r, "signature does not match")
	}
	return h.handle(w, r, body)
}

// handle routes a delivery whose signature is good.
func (h *Handler) handle(w http.ResponseWriter, r *http.Request, body []byte) error {
	event, delivery := r.Header.Get("X-GitHub-Event"), r.Header.Get("X-GitHub-Delivery")
	if event == "" {
		return errs.Errorf(errs.InvalidArgument, "missing X-GitHub-Event")
	}
	payload, err := payloadOf(r.Header.Get("Content-Type"), body)
	if err != nil {
		return errs.Errorf(errs.InvalidArgument, "%s", err.Error())
	}
	d, err := decide(event, payload, h.cfg.Branch, h.cfg.Repository)
	if err != nil {
		return errs.Errorf(errs.InvalidArgument, "%s", "malformed "+event+" payload")
	}
	if delivery != "" && !h.seen.add(delivery) {
		writeResult(w, http.StatusOK, "duplicate", "delivery "+delivery+" was handled already")
		return nil
	}
	h.act(d, delivery)
	status := http.StatusAccepted
	if d.status == "pong" {
		status = http.StatusOK
	}
	writeResult(w, status, d.status, d.reason)
	return nil
}

// act hands the decision to the small interfaces.
func (h *Handler) act(d decision, delivery string) {
	if d.trigger != "" && h.cfg.Trigger != nil {
		h.cfg.Trigger.Trigger(d.trigger)
	}
	if d.command != nil && h.cfg.Commands != nil {
		d.command.DeliveryID = delivery
		h.cfg.Commands.Enqueue(*d.command)
	}
	h.log.Debug("webhook delivery", "delivery", delivery, "status", d.status, "reason", d.reason)
}

// refuse is a 401 (UNAUTHENTICATED) that says why, logged here with the
// delivery's headers.
func (h *Handler) refuse(r *http.Request, why string) error {
	h.log.Warn("refused a webhook delivery", "reason", why, "delivery", r.Header.Get("X-GitHub-Delivery"),
		"event", r.Header.Get("X-GitHub-Event"), "remote", r.RemoteAddr)
	return errs.Errorf(errs.Unauthenticated, "%s", why)
}

// parseSignature reads "sha256=<64 hex digits>", or says what is wrong
// with the header. Nothing is read from the body of a delivery without one.
func parseSignature(header string) ([]byte, string) {
	hexSum, ok := strings.CutPrefix(header, "sha256=")
	if !ok {
		return nil, "missing X-Hub-Signature-256 (SHA-1 signatures are not accepted)"
	}
	sum, err := hex.DecodeString(hexSum)
	if err != nil || len(sum) != sha256.Size {
		return nil, "malformed X-Hub-Signature-256 (want sha256= and 64 hex digits)"
	}
	return sum, ""
}

// readHashed reads the body under the size cap and the read deadline,
// computing its HMAC-SHA256 as it arrives. The buffer is sized from
// Content-Length when there is one, so a declared body costs its size,
// not the doubling of a growing buffer.
func (h *Handler) readHashed(w http.ResponseWriter, r *http.Request) ([]byte, []byte, error) {
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(bodyReadTimeout)) // best effort
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		buf.Grow(int(r.ContentLength))
	}
	mac := hmac.New(sha256.New, h.cfg.Secret)
	_, err := io.Copy(io.MultiWriter(&buf, mac), http.MaxBytesReader(w, r.Body, h.cfg.MaxBodyBytes))
	return buf.Bytes(), mac.Sum(nil), err
}

// payloadOf returns the JSON payload: the body, or its "payload" field
// for a hook configured with the form content type.
func payloadOf(contentType string, body []byte) ([]byte, error) {
	mt := "application/json"
	if contentType != "" {
		var err error
		if mt, _, err = mime.ParseMediaType(contentType); err != nil {
			return nil, errors.New("bad Content-Type")
		}
	}
	switch mt {
	case "application/json":
		return body, nil
	case "application/x-www-form-urlencoded":
		form, err := url.ParseQuery(string(body))
		if err != nil {
			return nil, errors.New("bad form body")
		}
		return []byte(form.Get("payload")), nil
	}
	return nil, errors.New("unsupported Content-Type " + mt)
}

// writeResult answers a handled delivery.
func writeResult(w http.ResponseWriter, status int, result, reason string) {
	writeJSON(w, status, map[string]string{"status": result, "reason": reason})
}

// writeJSON sends v as JSON.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
