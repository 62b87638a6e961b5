package githubemu

import (
	"crypto/sha1"
	"encoding/hex"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Pull is a pull request as the emulator keeps it.
type Pull struct {
	Number  int
	ID      int64
	Title   string
	Body    string
	Author  string
	HeadRef string
	HeadSHA string
	// HeadRepo is the head's "owner/name" for a pull request from a fork;
	// empty means the base repository.
	HeadRepo string
	BaseRef  string
	State    string // "open" or "closed"
	Draft    bool
	// Mergeable is nil while GitHub would still be computing it.
	Mergeable      *bool
	Merged         bool
	MergedBy       string
	MergeCommitSHA string
	CreatedAt      time.Time
	UpdatedAt      time.Time
	ClosedAt       time.Time
	MergedAt       time.Time
}

// Comment is an issue (pull request conversation) comment.
type Comment struct {
	ID        int64
	Issue     int
	User      string
	Body      string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Status is one commit status.
type Status struct {
	ID          int64
	SHA         string
	State       string
	Context     string
	Description string
	TargetURL   string
	Creator     string
	CreatedAt   time.Time
}

// CheckRun is one check run.
type CheckRun struct {
	ID          int64
	Name        string
	HeadSHA     string
	Status      string
	Conclusion  string
	DetailsURL  string
	ExternalID  string
	Title       string
	Summary     string
	Text        string
	StartedAt   time.Time
	CompletedAt time.Time
}

// File is one entry of a pull request's changed files.
type File struct {
	Filename  string
	Status    string // added, removed, modified, renamed, ...
	Additions int
	Deletions int
	Patch     string
}

// MergeRequest is what the OnMerge hook is told about a merge.
type MergeRequest struct {
	Repo        string // "owner/name"
	Number      int
	HeadRef     string
	HeadSHA     string
	BaseRef     string
	Method      string // merge, squash or rebase
	CommitTitle string
	CommitMsg   string
}

// store is the emulator's state: the repositories, the id counter and the
// merge hook, under the one lock every handler runs with (see locked). Its
// clock and bot login come from the Options.
type store struct {
	opts    Options
	mu      sync.Mutex
	repos   map[string]*repo // by lower-cased "owner/name"
	nextID  int64
	onMerge func(MergeRequest) (string, error)
}

// newStore makes an empty store.
func newStore(opts Options) *store {
	return &store{opts: opts, repos: map[string]*repo{}, nextID: 1000}
}

// repo is one repository's state. Guarded by store.mu.
type repo struct {
	owner, name   string
	id            int64
	defaultBranch string
	refs          map[string]string // "heads/main" -> sha
	pulls         map[int]*Pull
	nextNumber    int
	comments      []*Comment // creation order
	statuses      []*Status  // creation order
	perms         map[string]string
	checks        map[int64]*CheckRun
	files         map[int][]File
	protected     map[string]bool
}

func (rp *repo) full() string { return rp.owner + "/" + rp.name }

// Repo is a handle on one repository of the emulator, for setting up and
// inspecting state in tests. Its methods are safe for concurrent use.
type Repo struct {
	s   *Server
	key string
}

// AddRepo creates (or returns) the repository "owner/name" with its
// default branch.
func (s *Server) AddRepo(full, defaultBranch string) *Repo {
	owner, name, _ := strings.Cut(full, "/")
	s.mu.Lock()
	defer s.mu.Unlock()
	key := strings.ToLower(full)
	if _, ok := s.repos[key]; !ok {
		s.repos[key] = &repo{
			owner: owner, name: name, id: s.newID(), defaultBranch: defaultBranch,
			refs: map[string]string{}, pulls: map[int]*Pull{}, nextNumber: 1,
			perms: map[string]string{}, checks: map[int64]*CheckRun{},
			files: map[int][]File{}, protected: map[string]bool{},
		}
	}
	return &Repo{s: s, key: key}
}

// newID hands out the next object id. Caller holds s.mu.
func (s *store) newID() int64 {
	s.nextID++
	return s.nextID
}

// with runs fn on the repository under the server's lock.
func (r *Repo) with(fn func(rp *repo)) {
	r.s.mu.Lock()
	defer r.s.mu.Unlock()
	fn(r.s.repos[r.key])
}

// SetRef points a ref ("heads/main", "refs/heads/main" or a bare branch
// name) at sha.
func (r *Repo) SetRef(ref, sha string) {
	r.with(func(rp *repo) { rp.refs[normRef(ref)] = sha })
}

// Ref returns the SHA a ref points at.
func (r *Repo) Ref(ref string) (sha string, ok bool) {
	r.with(func(rp *repo) { sha, ok = rp.refs[normRef(ref)] })
	return sha, ok
}

// normRef turns the accepted ref spellings into "heads/x" / "tags/x".
func normRef(ref string) string {
	ref = strings.TrimPrefix(ref, "refs/")
	if strings.HasPrefix(ref, "heads/") || strings.HasPrefix(ref, "tags/") || strings.HasPrefix(ref, "pull/") {
		return ref
	}
	return "heads/" + ref
}

// Push moves a branch to sha and, like GitHub, the head of every open pull
// request from that branch.
func (r *Repo) Push(branch, sha string) {
	r.with(func(rp *repo) {
		rp.refs[normRef(branch)] = sha
		for _, p := range rp.pulls {
			if p.State == "open" && p.HeadRepo == "" && p.HeadRef == branch {
				p.HeadSHA, p.UpdatedAt = sha, r.s.opts.Now()
			}
		}
	})
}

// OpenPull opens a pull request from p.HeadRef at p.HeadSHA into p.BaseRef
// and returns its number. Other fields default sensibly (author
// "octocat", mergeable true, title "Change <head>").
func (r *Repo) OpenPull(p Pull) int {
	now := r.s.opts.Now()
	if p.Author == "" {
		p.Author = "octocat"
	}
	if p.Title == "" {
		p.Title = "Change " + p.HeadRef
	}
	if p.Mergeable == nil {
		p.Mergeable = ptr(true)
	}
	p.State, p.CreatedAt, p.UpdatedAt = "open", now, now
	r.with(func(rp *repo) {
		p.Number, p.ID = rp.nextNumber, r.s.newID()
		rp.nextNumber++
		if p.HeadRepo == "" {
			rp.refs[normRef(p.HeadRef)] = p.HeadSHA
		}
		pp := p
		rp.pulls[p.Number] = &pp
	})
	return p.Number
}

// UpdatePull changes a pull request in place (close it, change its base,
// make it unmergeable...). It reports false when there is none.
func (r *Repo) UpdatePull(n int, fn func(p *Pull)) (ok bool) {
	r.with(func(rp *repo) {
		if p := rp.pulls[n]; p != nil {
			fn(p)
			p.UpdatedAt, ok = r.s.opts.Now(), true
		}
	})
	return ok
}

// Pull returns a copy of pull request n.
func (r *Repo) Pull(n int) (p Pull, ok bool) {
	r.with(func(rp *repo) {
		if pp := rp.pulls[n]; pp != nil {
			p, ok = *pp, true
		}
	})
	return p, ok
}

// Pulls returns copies of every pull request, by number.
func (r *Repo) Pulls() []Pull {
	var out []Pull
	r.with(func(rp *repo) {
		for _, p := range rp.pulls {
			out = append(out, *p)
		}
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Number < out[j].Number })
	return out
}

// AddComment adds a comment by user on issue (pull request) n, as if made
// on the web, and returns its id.
func (r *Repo) AddComment(n int, user, body string) int64 {
	var id int64
	r.with(func(rp *repo) { id = r.s.addComment(rp, n, user, body).ID })
	return id
}

// addComment stores a new comment. Caller holds s.mu.
func (s *store) addComment(rp *repo, n int, user, body string) *Comment {
	now := s.commentTime()
	c := &Comment{ID: s.newID(), Issue: n, User: user, Body: body, CreatedAt: now, UpdatedAt: now}
	rp.comments = append(rp.comments, c)
	return c
}

// commentTime is now as GitHub dates a comment: in whole seconds, as its
// REST API shows created_at and updated_at, so Comment's times are the
// ones a client reads.
func (s *store) commentTime() time.Time {
	return s.opts.Now().UTC().Truncate(time.Second)
}

// DeleteComment removes a comment, as a user deleting it on the web would.
func (r *Repo) DeleteComment(id int64) {
	r.with(func(rp *repo) {
		for i, c := range rp.comments {
			if c.ID == id {
				rp.comments = append(rp.comments[:i], rp.comments[i+1:]...)
				return
			}
		}
	})
}

// Comments returns copies of the comments on issue n, oldest first.
func (r *Repo) Comments(n int) []Comment {
	var out []Comment
	r.with(func(rp *repo) {
		for _, c := range rp.comments {
			if c.Issue == n {
				out = append(out, *c)
			}
		}
	})
	return out
}

// Statuses returns the statuses set on sha, oldest first.
func (r *Repo) Statuses(sha string) []Status {
	var out []Status
	r.with(func(rp *repo) {
		for _, st := range rp.statuses {
			if st.SHA == sha {
				out = append(out, *st)
			}
		}
	})
	return out
}

// CheckRuns returns copies of the check runs, by id.
func (r *Repo) CheckRuns() []CheckRun {
	var out []CheckRun
	r.with(func(rp *repo) {
		for _, c := range rp.checks {
			out = append(out, *c)
		}
	})
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// SetPermission gives user a role: admin, maintain, write, triage, read or
// none. Users without one are unknown to GitHub (404).
func (r *Repo) SetPermission(user, role string) {
	r.with(func(rp *repo) { rp.perms[strings.ToLower(user)] = role })
}

// SetFiles sets the changed files pull request n lists.
func (r *Repo) SetFiles(n int, files []File) {
	r.with(func(rp *repo) { rp.files[n] = append([]File(nil), files...) })
}

// SetProtected marks a branch protected (get-branch reports it).
func (r *Repo) SetProtected(branch string, protected bool) {
	r.with(func(rp *repo) { rp.protected[branch] = protected })
}

// repoFor finds the repository named in r's path, answering 404 when it
// is unknown. Caller holds s.mu.
func (s *store) repoFor(w http.ResponseWriter, r *http.Request) *repo {
	rp := s.repos[strings.ToLower(r.PathValue("owner")+"/"+r.PathValue("repo"))]
	if rp == nil {
		writeError(w, http.StatusNotFound, "Not Found")
	}
	return rp
}

// locked runs a handler under the store's lock with its repository.
func (s *store) locked(h func(w http.ResponseWriter, r *http.Request, rp *repo)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if rp := s.repoFor(w, r); rp != nil {
			h(w, r, rp)
		}
	}
}

// intPath parses an integer path value, answering 404 when it is not one.
func intPath(w http.ResponseWriter, r *http.Request, name string) (int64, bool) {
	n, err := strconv.ParseInt(r.PathValue(name), 10, 64)
	if err != nil || n <= 0 {
		writeError(w, http.StatusNotFound, "Not Found")
		return 0, false
	}
	return n, true
}

// fakeSHA makes a deterministic commit-like SHA from parts.
func fakeSHA(parts ...string) string {
	h := sha1.Sum([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(h[:])
}

// ptr returns a pointer to v.
func ptr[T any](v T) *T { return &v }
