package githubemu

import (
	"net/http"
	"strings"
	"unicode/utf8"
)

// MaxStatusDescription is the longest commit status description GitHub
// takes, in characters.
const MaxStatusDescription = 140

// statusBody is repos/create-commit-status's request body.
type statusBody struct {
	State       *string `json:"state"`
	TargetURL   string  `json:"target_url"`
	Description string  `json:"description"`
	Context     string  `json:"context"`
}

// statusesAPI serves commit statuses: create and the combined status.
type statusesAPI struct {
	*store
	*renderer
}

// createStatus serves repos/create-commit-status.
func (s *statusesAPI) createStatus(w http.ResponseWriter, r *http.Request, rp *repo) {
	var b statusBody
	if !decodeBody(w, r, &b) || !required(w, "Status", map[string]*string{"state": b.State}) {
		return
	}
	switch {
	case !oneOf(*b.State, "error", "failure", "pending", "success"):
		writeInvalid(w, fieldError{Resource: "Status", Field: "state", Code: "invalid"})
		return
	case utf8.RuneCountInString(b.Description) > MaxStatusDescription:
		writeInvalid(w, fieldError{Resource: "Status", Field: "description", Code: "custom",
			Message: "description is too long (maximum is 140 characters)"})
		return
	}
	if b.Context == "" {
		b.Context = "default"
	}
	st := &Status{ID: s.newID(), SHA: r.PathValue("sha"), State: *b.State, Context: b.Context,
		Description: b.Description, TargetURL: b.TargetURL, Creator: s.opts.BotLogin, CreatedAt: s.opts.Now()}
	rp.statuses = append(rp.statuses, st)
	o := s.statusObject(st, rp)
	s.setUser(child(o, "creator"), st.Creator)
	w.Header().Set("Location", o["url"].(string))
	writeJSON(w, http.StatusCreated, o)
}

// statusObject renders st from the status example.
func (s *renderer) statusObject(st *Status, rp *repo) obj {
	o := s.shape("rest", "status", rp)
	o["url"] = strings.TrimSuffix(s.APIURL(), "/") + "/repos/" + rp.full() + "/statuses/" + st.SHA
	o["id"], o["node_id"], o["state"], o["context"] = st.ID, nodeID("06:Status", st.ID), st.State, st.Context
	o["description"], o["target_url"] = nilIfEmpty(st.Description), nilIfEmpty(st.TargetURL)
	o["created_at"], o["updated_at"] = stamp(st.CreatedAt), stamp(st.CreatedAt)
	return o
}

// combinedStatus serves repos/get-combined-status-for-ref at
// commits/{ref}/status; ref is a SHA or a branch.
func (s *statusesAPI) combinedStatus(w http.ResponseWriter, r *http.Request, rp *repo) {
	ref, ok := strings.CutSuffix(r.PathValue("ref"), "/status")
	if !ok {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	sha := ref
	if v, isRef := rp.refs[normRef(ref)]; isRef {
		sha = v
	}
	latest := latestByContext(rp.statuses, sha)
	o := s.shape("rest", "combined-commit-status", rp)
	items := make([]any, 0, len(latest))
	for _, st := range latest {
		so := s.statusObject(st, rp)
		delete(so, "creator") // combined statuses carry none, as in the example
		items = append(items, so)
	}
	api := strings.TrimSuffix(s.APIURL(), "/") + "/repos/" + rp.full()
	o["state"], o["statuses"], o["sha"], o["total_count"] = combine(latest), items, sha, len(items)
	o["commit_url"], o["url"] = api+"/commits/"+sha, api+"/commits/"+sha+"/status"
	s.setRepo(child(o, "repository"), rp)
	writeJSON(w, http.StatusOK, o)
}

// latestByContext keeps the newest status per context, in first-seen
// order.
func latestByContext(all []*Status, sha string) []*Status {
	idx := map[string]int{}
	var out []*Status
	for _, st := range all {
		if st.SHA != sha {
			continue
		}
		if i, ok := idx[st.Context]; ok {
			out[i] = st
			continue
		}
		idx[st.Context] = len(out)
		out = append(out, st)
	}
	return out
}

// combine is GitHub's combined state: failure if any error or failure,
// pending if any pending or none at all, else success.
func combine(sts []*Status) string {
	if len(sts) == 0 {
		return "pending"
	}
	state := "success"
	for _, st := range sts {
		switch st.State {
		case "error", "failure":
			return "failure"
		case "pending":
			state = "pending"
		}
	}
	return state
}

// reposAPI serves what the emulator reads of a repository itself:
// collaborator permissions, branches and refs.
type reposAPI struct {
	*renderer
}

// legacyPermission is the "permission" field GitHub derives from a role:
// maintain reads as write and triage as read. role_name keeps the role.
var legacyPermission = map[string]string{
	"admin": "admin", "maintain": "write", "write": "write", "triage": "read", "read": "read", "none": "none",
}

// permission serves repos/get-collaborator-permission-level.
func (s *reposAPI) permission(w http.ResponseWriter, r *http.Request, rp *repo) {
	login := r.PathValue("user")
	role, ok := rp.perms[strings.ToLower(login)]
	if !ok {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	o := s.shape("rest", "repository-collaborator-permission", rp)
	perm, known := legacyPermission[role]
	if !known {
		perm = "read" // a custom role; its base is not modelled
	}
	o["permission"], o["role_name"] = perm, role
	s.setUser(child(o, "user"), login)
	writeJSON(w, http.StatusOK, o)
}

// getBranch serves repos/get-branch. go-github reads it without
// CheckResponse, so errors here are plain status codes to it.
func (s *reposAPI) getBranch(w http.ResponseWriter, r *http.Request, rp *repo) {
	name := r.PathValue("branch")
	sha, ok := rp.refs["heads/"+name]
	if !ok {
		writeError(w, http.StatusNotFound, "Branch not found")
		return
	}
	o := s.shape("rest", "branch-with-protection", rp)
	api := strings.TrimSuffix(s.APIURL(), "/") + "/repos/" + rp.full()
	o["name"], o["protected"] = name, rp.protected[name]
	o["protection_url"] = api + "/branches/" + name + "/protection"
	o["_links"] = obj{"html": s.URL() + "/" + rp.full() + "/tree/" + name, "self": api + "/branches/" + name}
	if c := child(o, "commit"); c != nil {
		c["sha"], c["node_id"] = sha, nodeID("06:Commit", int64(len(sha)))
		c["url"], c["html_url"] = api+"/commits/"+sha, s.URL()+"/"+rp.full()+"/commit/"+sha
		c["comments_url"] = api + "/commits/" + sha + "/comments"
	}
	writeJSON(w, http.StatusOK, o)
}

// getRef serves git/get-ref for "heads/x" and "tags/x".
func (s *reposAPI) getRef(w http.ResponseWriter, r *http.Request, rp *repo) {
	ref := r.PathValue("ref")
	sha, ok := rp.refs[ref]
	if !ok || !(strings.HasPrefix(ref, "heads/") || strings.HasPrefix(ref, "tags/")) {
		writeError(w, http.StatusNotFound, "Not Found")
		return
	}
	o := s.shape("rest", "git-ref", rp)
	api := strings.TrimSuffix(s.APIURL(), "/") + "/repos/" + rp.full()
	o["ref"], o["url"], o["node_id"] = "refs/"+ref, api+"/git/refs/"+ref, nodeID("03:Ref", rp.id)
	o["object"] = obj{"type": "commit", "sha": sha, "url": api + "/git/commits/" + sha}
	writeJSON(w, http.StatusOK, o)
}

// oneOf reports whether v is one of the allowed values.
func oneOf(v string, allowed ...string) bool {
	for _, a := range allowed {
		if v == a {
			return true
		}
	}
	return false
}
