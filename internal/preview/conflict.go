package preview

// SetConflict records on e (a branch or pull request experiment) whether
// its source can be merged into the live branch: with a conflict the
// experiment stays listed, its Conflict and Reason say why, and it is not
// previewed (a conflicted source has no merged policy to preview); once
// the conflict is gone it is previewed again when the cap leaves room.
// exps are the stored experiments, for the cap. e is returned unchanged
// when its conflict state is already msg.
func SetConflict(e *Experiment, msg string, exps []*Experiment, s Settings) *Experiment {
	if e == nil || e.Conflict == msg {
		return e
	}
	c := e.clone()
	c.Conflict = msg
	switch {
	case msg != "":
		c.Previewed, c.Reason = false, "the source cannot be merged into the live branch: "+msg
	case countPreviewed(exps, e.PolicyName()) < s.maxPerPolicy():
		c.Previewed, c.Reason = true, ""
	default:
		c.Previewed, c.Reason = false, capError(e.PolicyName(), s).Msg
	}
	return c
}
