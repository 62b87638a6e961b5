package raftstore

import (
	"strings"
	"time"
	"unicode/utf8"
)

// The leader's records: what it learnt from git and GitHub, replicated so
// that every node (a follower answering /v1/status, the next leader) has
// it. Each kind has its own table in State and its own commands; the
// values are typed and bounded, because most of their text comes from
// whoever can push a branch or open a pull request.

// Bounds of the leader's records. A record that exceeds one is refused
// before the log (NewCommand) and again in Apply; the leader skips or
// clips what it cannot record rather than failing its pass.
const (
	// MaxKeyBytes bounds names: a source, a branch, a policy, a user, a
	// command verb, an etag.
	MaxKeyBytes = 256
	// MaxTextBytes bounds free text: URLs, titles, error messages.
	MaxTextBytes = 4096
	// MaxRecordErrors bounds the errors of a Validation (the leader keeps
	// 100 and a line saying how many more).
	MaxRecordErrors = 128
	// MaxRecordPolicies bounds the policies a branch or pull request
	// record names.
	MaxRecordPolicies = 1024
	// MaxBranches, MaxPulls and MaxClaims bound the tables: a put of a new
	// key beyond them is rejected. The leader keeps far fewer (200, 200
	// and 256); these stop a runaway or hostile proposer.
	MaxBranches = 1024
	MaxPulls    = 1024
	MaxClaims   = 1024
)

// SourceStatus is the live status of a policy source while fetching it
// fails (Kubewarden's PullError). Its table holds no entry for a source
// that fetches fine.
type SourceStatus struct {
	// URL is the remote, redacted.
	URL string `json:"url"`
	// Error says what failed and what happens next (scrubbed of secrets).
	Error string `json:"error"`
	// Reason is gitsource's classification: network, timeout, auth,
	// not-found, canceled; "" for other errors.
	Reason string `json:"reason,omitempty"`
	// Since is when fetching started failing (the leader's clock).
	Since time.Time `json:"since"`
	// Revision is the last revision of the live branch read successfully,
	// the one the cluster keeps following.
	Revision string `json:"revision,omitempty"`
}

// Validation is the verdict on a branch's or pull request's whole policies
// tree.
type Validation struct {
	Valid  bool     `json:"valid"`
	Errors []string `json:"errors"`
}

// BranchRecord is one branch other than the live one, as an experiment
// source tracked by the leader (without GitHub every other branch that
// changes a policy is an experiment).
type BranchRecord struct {
	Branch     string `json:"branch"`
	HeadCommit string `json:"headCommit"`
	// Revision is "<branch>@sha1:<headCommit>".
	Revision string `json:"revision"`
	// ChangedPolicies names, sorted, the policies whose content differs
	// from the live branch's head.
	ChangedPolicies []string   `json:"changedPolicies"`
	Validation      Validation `json:"validation"`
}

// PullRecord is one open pull request into the live branch, as an
// experiment source tracked by the leader.
type PullRecord struct {
	Number     int    `json:"number"`
	Title      string `json:"title"`
	URL        string `json:"url"`
	Author     string `json:"author"`
	HeadCommit string `json:"headCommit"`
	// MainCommit is the live branch's head it was compared with.
	MainCommit string `json:"mainCommit"`
	// ChangedPolicies names, sorted, the policies whose content differs
	// from the live branch's head; Etags are their etags at HeadCommit
	// (set when the tree is valid), LiveEtags at MainCommit.
	ChangedPolicies []string          `json:"changedPolicies"`
	Etags           map[string]string `json:"etags"`
	LiveEtags       map[string]string `json:"liveEtags"`
	Validation      Validation        `json:"validation"`
	// Preview is ACTIVE or SUSPENDED (comment commands); ACTIVE at first
	// for a writer's pull request, SUSPENDED for others' (Writer).
	Preview string `json:"preview"`
	// Writer is whether GitHub said the author may write when the pull
	// request was first recorded: only then does its preview start by
	// itself and its comment show sample requests.
	Writer bool `json:"writer,omitempty"`
	// HeadShown is the head the pull request's preview comment named when
	// GitHub last answered the leader's create or edit of it, and
	// HeadShownAt when GitHub says (the comment's updated_at, GitHub's
	// clock, whole seconds) the comment started showing it. Both come
	// from GitHub's answer, before proposing. A comment command binds to
	// HeadCommit only when HeadShown is HeadCommit and GitHub dates the
	// command strictly after HeadShownAt: its writer could have seen the
	// comment naming that head. Both are empty until the comment for the
	// current head is posted (the commands are refused meanwhile).
	HeadShown   string    `json:"headShown,omitempty"`
	HeadShownAt time.Time `json:"headShownAt,omitzero"`
	// HeadSince was the leader's clock when it first recorded HeadCommit,
	// which version 1 entries of builds between the fork approvals and
	// HeadShownAt hold. It is decoded (payloads decode strictly) and
	// ignored: the leader's clock is not GitHub's.
	HeadSince time.Time `json:"headSince,omitzero"`
	// ApprovedHead is the head a writer approved with `/reconciler preview
	// start` on a non-writer's pull request, ApprovedBy that writer. The
	// approval covers that commit only: a later push holds the preview
	// again until a writer approves the new head.
	ApprovedHead string `json:"approvedHead,omitempty"`
	ApprovedBy   string `json:"approvedBy,omitempty"`
	// HiddenReads are the request values hidden from samples (headers,
	// query parameters and attributes not in [preview] show) that the
	// rules the pull request adds or changes read, for the writer who
	// approves its preview: its per-rule counts depend on them. At most
	// MaxHiddenReads, each at most MaxKeyBytes.
	HiddenReads []string `json:"hiddenReads,omitempty"`
}

// MaxHiddenReads bounds PullRecord.HiddenReads.
const MaxHiddenReads = 32

// CommandClaim records that the leader ran a pull request comment command,
// so that a webhook redelivered after a leader change does not run it twice.
type CommandClaim struct {
	CommentID int64     `json:"commentId"`
	PR        int       `json:"pr"`
	User      string    `json:"user"`
	Verb      string    `json:"verb"`
	Time      time.Time `json:"time"`
}

// Validate checks the bounds of a source status.
func (r SourceStatus) Validate() error {
	if r.Error == "" {
		return invalid("error is required: a source without one has no status record")
	}
	return first(text("url", r.URL, MaxTextBytes), text("error", r.Error, MaxTextBytes),
		text("reason", r.Reason, MaxKeyBytes), text("revision", r.Revision, MaxTextBytes),
		needTime("since", r.Since))
}

// Validate checks the bounds of a validation verdict.
func (v Validation) Validate() error {
	if len(v.Errors) > MaxRecordErrors {
		return invalid("%d validation errors, limit %d", len(v.Errors), MaxRecordErrors)
	}
	for _, e := range v.Errors {
		if err := text("validation error", e, MaxTextBytes); err != nil {
			return err
		}
	}
	return nil
}

// Validate checks the bounds of a branch record.
func (r BranchRecord) Validate() error {
	return first(key("branch", r.Branch), commit("headCommit", r.HeadCommit, true),
		text("revision", r.Revision, MaxTextBytes), policyNames(r.ChangedPolicies), r.Validation.Validate())
}

// Validate checks the bounds of a pull request record.
func (r PullRecord) Validate() error {
	if r.Number <= 0 {
		return invalid("number must be positive")
	}
	switch r.Preview {
	case "", "ACTIVE", "SUSPENDED":
	default:
		return invalid("preview %q is not ACTIVE or SUSPENDED", r.Preview)
	}
	return first(text("title", r.Title, MaxTextBytes), text("url", r.URL, MaxTextBytes),
		text("author", r.Author, MaxKeyBytes), commit("headCommit", r.HeadCommit, true),
		commit("mainCommit", r.MainCommit, false), policyNames(r.ChangedPolicies),
		etags("etags", r.Etags), etags("liveEtags", r.LiveEtags), r.Validation.Validate(),
		commit("approvedHead", r.ApprovedHead, false), text("approvedBy", r.ApprovedBy, MaxKeyBytes),
		hiddenReads(r.HiddenReads), headShown(r.HeadShown, r.HeadShownAt))
}

// headShown checks PullRecord.HeadShown and HeadShownAt: both or neither.
func headShown(head string, at time.Time) error {
	if (head == "") != at.IsZero() {
		return invalid("headShown and headShownAt go together")
	}
	return commit("headShown", head, false)
}

// hiddenReads checks the bounds of PullRecord.HiddenReads.
func hiddenReads(rs []string) error {
	if len(rs) > MaxHiddenReads {
		return invalid("%d hidden reads, limit %d", len(rs), MaxHiddenReads)
	}
	for _, r := range rs {
		if err := text("hidden read", r, MaxKeyBytes); err != nil {
			return err
		}
	}
	return nil
}

// Validate checks the bounds of a command claim.
func (c CommandClaim) Validate() error {
	if c.CommentID <= 0 || c.PR <= 0 {
		return invalid("commentId and pr must be positive")
	}
	return first(text("user", c.User, MaxKeyBytes), text("verb", c.Verb, MaxKeyBytes), needTime("time", c.Time))
}

// text checks that s is UTF-8 without NUL, of at most max bytes.
func text(field, s string, max int) error {
	if len(s) > max {
		return invalid("%s is %d bytes, limit %d", field, len(s), max)
	}
	if !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
		return invalid("%s is not UTF-8 text", field)
	}
	return nil
}

// key is a required text of at most MaxKeyBytes.
func key(field, s string) error {
	if s == "" {
		return invalid("%s is required", field)
	}
	return text(field, s, MaxKeyBytes)
}

// commit checks the shape of a git object id: letters and digits, at
// most a SHA-256's length.
func commit(field, s string, required bool) error {
	if s == "" && !required {
		return nil
	}
	if s == "" || len(s) > 64 || strings.Trim(s, "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") != "" {
		return invalid("%s %q is not a commit id", field, clip(s))
	}
	return nil
}

func policyNames(names []string) error {
	if len(names) > MaxRecordPolicies {
		return invalid("%d policies, limit %d", len(names), MaxRecordPolicies)
	}
	for _, n := range names {
		if err := key("policy name", n); err != nil {
			return err
		}
	}
	return nil
}

func etags(field string, m map[string]string) error {
	if len(m) > MaxRecordPolicies {
		return invalid("%s has %d entries, limit %d", field, len(m), MaxRecordPolicies)
	}
	for name, etag := range m {
		if err := first(key(field+" policy", name), key(field+" etag", etag)); err != nil {
			return err
		}
	}
	return nil
}

// clip shortens a value quoted in an error message.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "…"
	}
	return s
}

// ClipText makes text the proposer does not control fit a record: valid
// UTF-8 without NUL, cut at a rune boundary to at most max bytes with "…"
// marking the cut.
func ClipText(s string, max int) string {
	s = strings.ToValidUTF8(strings.ReplaceAll(s, "\x00", ""), "\uFFFD")
	if len(s) <= max {
		return s
	}
	cut := max - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
