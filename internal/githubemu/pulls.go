package githubemu

import (
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// routes registers every REST operation the emulator serves, each with the
// handler type of its resource family.
func (s *Server) routes() {
	pg := pager{prefix: s.prefix}
	pulls := &pullsAPI{store: s.store, renderer: s.renderer, pager: pg}
	issues := &issuesAPI{store: s.store, renderer: s.renderer, pager: pg}
	statuses := &statusesAPI{store: s.store, renderer: s.renderer}
	repos := &reposAPI{renderer: s.renderer}
	checks := &checksAPI{store: s.store, renderer: s.renderer}
	m := s.mux
	m.HandleFunc("GET /repos/{owner}/{repo}/pulls", s.locked(pulls.listPulls))
	m.HandleFunc("POST /repos/{owner}/{repo}/pulls", s.locked(pulls.createPull))
	m.HandleFunc("GET /repos/{owner}/{repo}/pulls/{number}", s.locked(pulls.getPull))
	m.HandleFunc("PUT /repos/{owner}/{repo}/pulls/{number}/merge", pulls.mergePull) // locks itself
	m.HandleFunc("GET /repos/{owner}/{repo}/pulls/{number}/files", s.locked(pulls.listFiles))
	// One pattern for both GETs: ServeMux cannot order ".../issues/{number}/comments"
	// against ".../issues/comments/{id}".
	m.HandleFunc("GET /repos/{owner}/{repo}/issues/{number}/{sub}", s.locked(issues.issueGet))
	m.HandleFunc("POST /repos/{owner}/{repo}/issues/{number}/comments", s.locked(issues.createComment))
	m.HandleFunc("PATCH /repos/{owner}/{repo}/issues/comments/{id}", s.locked(issues.updateComment))
	m.HandleFunc("POST /repos/{owner}/{repo}/statuses/{sha}", s.locked(statuses.createStatus))
	m.HandleFunc("GET /repos/{owner}/{repo}/commits/{ref...}", s.locked(statuses.combinedStatus))
	m.HandleFunc("GET /repos/{owner}/{repo}/collaborators/{user}/permission", s.locked(repos.permission))
	m.HandleFunc("GET /repos/{owner}/{repo}/branches/{branch}", s.locked(repos.getBranch))
	m.HandleFunc("GET /repos/{owner}/{repo}/git/ref/{ref...}", s.locked(repos.getRef))
	m.HandleFunc("POST /repos/{owner}/{repo}/check-runs", s.locked(checks.createCheckRun))
	m.HandleFunc("PATCH /repos/{owner}/{repo}/check-runs/{id}", s.locked(checks.updateCheckRun))
}

// pullsAPI serves the pulls family: list, get, create, files and merge.
type pullsAPI struct {
	*store
	*renderer
	pager
	mergeMu sync.Mutex // serializes merges, whose hook runs unlocked
}

// listPulls serves pulls/list: state, head ("owner:branch") and base
// filters, newest first, paginated.
func (s *pullsAPI) listPulls(w http.ResponseWriter, r *http.Request, rp *repo) {
	q := r.URL.Query()
	state := q.Get("state")
	if state == "" {
		state = "open"
	}
	if state != "open" && state != "closed" && state != "all" {
		writeInvalid(w, fieldError{Resource: "PullRequest", Field: "state", Code: "invalid"})
		return
	}
	var out []*Pull
	for _, p := range rp.pulls {
		if (state == "all" || p.State == state) && matchHead(p, rp, q.Get("head")) &&
			(q.Get("base") == "" || q.Get("base") == p.BaseRef) {
			out = append(out, p)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Number > out[j].Number })
	if strings.EqualFold(q.Get("direction"), "asc") {
		sort.Slice(out, func(i, j int) bool { return out[i].Number < out[j].Number })
	}
	lo, hi := s.paginate(w, r, len(out))
	items := make([]obj, 0, hi-lo)
	for _, p := range out[lo:hi] {
		items = append(items, s.pullObject("pull-request-simple", p, rp))
	}
	writeJSON(w, http.StatusOK, items)
}

// matchHead applies the list filter head=owner:branch (or branch).
func matchHead(p *Pull, rp *repo, head string) bool {
	if head == "" {
		return true
	}
	owner, branch, ok := strings.Cut(head, ":")
	if !ok {
		return p.HeadRef == head
	}
	return strings.EqualFold(owner, headOwner(p, rp)) && p.HeadRef == branch
}

// headOwner is the owner of a pull request's head repository.
func headOwner(p *Pull, rp *repo) string {
	if p.HeadRepo != "" {
		owner, _, _ := strings.Cut(p.HeadRepo, "/")
		return owner
	}
	return rp.owner
}

// getPull serves pulls/get.
func (s *pullsAPI) getPull(w http.ResponseWriter, r *http.Request, rp *repo) {
	p := s.pullFor(w, r, rp)
	if p != nil {
		writeJSON(w, http.StatusOK, s.pullObject("pull-request", p, rp))
	}
}

// pullFor finds the pull request named in the path, or answers 404.
func (s *pullsAPI) pullFor(w http.ResponseWriter, r *http.Request, rp *repo) *Pull {
	n, ok := intPath(w, r, "number")
	if !ok {
		return nil
	}
	p := rp.pulls[int(n)]
	if p == nil {
		writeError(w, http.StatusNotFound, "Not Found")
	}
	return p
}

// pullObject renders p from the named example ("pull-request" or
// "pull-request-simple").
func (s *renderer) pullObject(shape string, p *Pull, rp *repo) obj {
	o := s.shape("rest", shape, rp)
	s.fillPull(o, p, rp)
	return o
}

// fillPull overwrites a pull request object (REST or webhook example) with
// p's state.
func (s *renderer) fillPull(o obj, p *Pull, rp *repo) {
	num := strconv.Itoa(p.Number)
	api := strings.TrimSuffix(s.APIURL(), "/") + "/repos/" + rp.full()
	o["id"], o["number"], o["node_id"] = p.ID, p.Number, nodeID("011:PullRequest", p.ID)
	o["url"], o["html_url"] = api+"/pulls/"+num, s.URL()+"/"+rp.full()+"/pull/"+num
	o["diff_url"], o["patch_url"] = s.URL()+"/"+rp.full()+"/pull/"+num+".diff", s.URL()+"/"+rp.full()+"/pull/"+num+".patch"
	o["issue_url"], o["comments_url"] = api+"/issues/"+num, api+"/issues/"+num+"/comments"
	o["commits_url"], o["review_comments_url"] = api+"/pulls/"+num+"/commits", api+"/pulls/"+num+"/comments"
	o["statuses_url"] = api + "/statuses/" + p.HeadSHA
	o["state"], o["title"], o["body"], o["draft"], o["locked"] = p.State, p.Title, p.Body, p.Draft, false
	o["active_lock_reason"], o["author_association"] = nil, "CONTRIBUTOR"
	o["created_at"], o["updated_at"] = stamp(p.CreatedAt), stamp(p.UpdatedAt)
	o["closed_at"], o["merged_at"] = stampOrNil(p.ClosedAt), stampOrNil(p.MergedAt)
	o["merge_commit_sha"] = nilIfEmpty(p.MergeCommitSHA)
	o["labels"], o["milestone"], o["assignee"], o["assignees"] = []any{}, nil, nil, []any{}
	o["requested_reviewers"], o["requested_teams"] = []any{}, []any{}
	s.setUser(child(o, "user"), p.Author)
	s.setBranch(child(o, "head"), p.HeadRef, p.HeadSHA, headOwner(p, rp), rp)
	s.setBranch(child(o, "base"), p.BaseRef, rp.refs[normRef(p.BaseRef)], rp.owner, rp)
	if p.HeadRepo != "" {
		setFork(child(child(o, "head"), "repo"), p.HeadRepo)
	}
	if _, full := o["merged"]; full {
		s.setMergeState(o, p, rp)
	}
}

// setMergeState fills the fields only pulls/get returns.
func (s *renderer) setMergeState(o obj, p *Pull, rp *repo) {
	o["merged"], o["mergeable"], o["rebaseable"] = p.Merged, nil, nil
	o["mergeable_state"] = "unknown"
	if p.Mergeable != nil {
		o["mergeable"], o["rebaseable"] = *p.Mergeable, *p.Mergeable
		o["mergeable_state"] = map[bool]string{true: "clean", false: "dirty"}[*p.Mergeable]
	}
	o["merged_by"] = nil
	if p.Merged {
		o["merged_by"] = s.user(p.MergedBy, rp)
	}
	o["comments"] = countComments(rp, p.Number)
	o["review_comments"], o["commits"], o["changed_files"] = 0, 1, len(rp.files[p.Number])
}

// setBranch fills a head/base object.
func (s *renderer) setBranch(b obj, ref, sha, owner string, rp *repo) {
	if b == nil {
		return
	}
	b["ref"], b["sha"], b["label"] = ref, sha, owner+":"+ref
	s.setUser(child(b, "user"), owner)
	s.setRepo(child(b, "repo"), rp)
}

// setFork renames a head repository object after the fork it is.
func setFork(o obj, full string) {
	if o == nil {
		return
	}
	owner, name, _ := strings.Cut(full, "/")
	o["full_name"], o["name"], o["fork"] = full, name, true
	o["id"] = userID(full)
	if u := child(o, "owner"); u != nil {
		u["login"] = owner
	}
}

// countComments counts the comments on issue n.
func countComments(rp *repo, n int) int {
	c := 0
	for _, cm := range rp.comments {
		if cm.Issue == n {
			c++
		}
	}
	return c
}

// newPullBody is what pulls/create accepts.
type newPullBody struct {
	Title *string `json:"title"`
	Head  *string `json:"head"`
	Base  *string `json:"base"`
	Body  *string `json:"body"`
	Draft *bool   `json:"draft"`
}

// createPull serves pulls/create (from a branch of this repository).
func (s *pullsAPI) createPull(w http.ResponseWriter, r *http.Request, rp *repo) {
	var b newPullBody
	if !decodeBody(w, r, &b) || !required(w, "PullRequest", map[string]*string{"head": b.Head, "base": b.Base, "title": b.Title}) {
		return
	}
	head := *b.Head
	if owner, branch, ok := strings.Cut(head, ":"); ok && strings.EqualFold(owner, rp.owner) {
		head = branch
	}
	headSHA, okHead := rp.refs[normRef(head)]
	baseSHA, okBase := rp.refs[normRef(*b.Base)]
	switch {
	case !okHead:
		writeInvalid(w, fieldError{Resource: "PullRequest", Field: "head", Code: "invalid"})
		return
	case !okBase:
		writeInvalid(w, fieldError{Resource: "PullRequest", Field: "base", Code: "invalid"})
		return
	case headSHA == baseSHA:
		writeInvalid(w, fieldError{Resource: "PullRequest", Code: "custom", Message: "No commits between " + *b.Base + " and " + head})
		return
	}
	for _, p := range rp.pulls {
		if p.State == "open" && p.HeadRepo == "" && p.HeadRef == head && p.BaseRef == *b.Base {
			writeInvalid(w, fieldError{Resource: "PullRequest", Code: "custom", Message: "A pull request already exists for " + rp.owner + ":" + head + "."})
			return
		}
	}
	now := s.opts.Now()
	p := &Pull{Number: rp.nextNumber, ID: s.newID(), Title: *b.Title, Body: deref(b.Body), Author: s.opts.BotLogin,
		HeadRef: head, HeadSHA: headSHA, BaseRef: *b.Base, State: "open", Draft: b.Draft != nil && *b.Draft,
		Mergeable: ptr(true), CreatedAt: now, UpdatedAt: now}
	rp.nextNumber++
	rp.pulls[p.Number] = p
	o := s.pullObject("pull-request", p, rp)
	w.Header().Set("Location", o["url"].(string))
	writeJSON(w, http.StatusCreated, o)
}

// required answers 422 missing_field for the first absent field.
func required(w http.ResponseWriter, resource string, fields map[string]*string) bool {
	names := make([]string, 0, len(fields))
	for k := range fields {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if fields[k] == nil {
			writeInvalid(w, fieldError{Resource: resource, Field: k, Code: "missing_field"})
			return false
		}
	}
	return true
}

// listFiles serves pulls/list-files.
func (s *pullsAPI) listFiles(w http.ResponseWriter, r *http.Request, rp *repo) {
	p := s.pullFor(w, r, rp)
	if p == nil {
		return
	}
	files := rp.files[p.Number]
	lo, hi := s.paginate(w, r, len(files))
	items := make([]obj, 0, hi-lo)
	for _, f := range files[lo:hi] {
		o := s.shape("rest", "diff-entry", rp)
		o["sha"], o["filename"], o["status"] = fakeSHA(p.HeadSHA, f.Filename), f.Filename, f.Status
		o["additions"], o["deletions"], o["changes"] = f.Additions, f.Deletions, f.Additions+f.Deletions
		o["patch"] = f.Patch
		base := s.URL() + "/" + rp.full()
		o["blob_url"], o["raw_url"] = base+"/blob/"+p.HeadSHA+"/"+f.Filename, base+"/raw/"+p.HeadSHA+"/"+f.Filename
		o["contents_url"] = strings.TrimSuffix(s.APIURL(), "/") + "/repos/" + rp.full() + "/contents/" + f.Filename + "?ref=" + p.HeadSHA
		items = append(items, o)
	}
	writeJSON(w, http.StatusOK, items)
}

// nilIfEmpty is s, or JSON null when empty.
func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// deref is *p, or "" for nil.
func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
