// Package reconcile is the leader loop. Each pass is an ordered list of
// small steps, as flux's source-controller does it:
//
//  1. Fetch the policy repository (Source, a bare clone in the leader's
//     data directory). A failure is the PullError condition: kept in the
//     leader's memory for the cluster view and as a replicated record
//     (SourceRecord), so every node shows it; the first successful fetch
//     clears it. The active generation keeps serving.
//  2. Skip the pass when no ref moved since the last one: an idle poll
//     costs one ref listing and writes nothing to raft.
//  3. Turn every new commit of the live branch into a generation, oldest
//     first (syncMain): validate it (load, merge, compile, policy tests);
//     record an invalid one INVALID with its errors (MarkInvalid); stage
//     the newest valid one (StageGeneration). Commits that change no
//     policy make no generation.
//  4. Record each other branch as an experiment (BranchRecord): which
//     policies it changes and whether it validates, written only when
//     that changed.
//
// Beside the passes, the promoter activates the staged generation once
// every reachable node has reported Ready (two-phase promotion), and
// Rollback writes a revert commit for the normal path to promote.
//
// The loop runs only on the leader. A new leader resumes from the
// replicated state alone: it continues after the newest generation's
// commit, and the state machine activates only a STAGED generation, so
// nothing is recorded or promoted twice. It does no compiling for
// serving: nodes compile staged generations themselves (internal/node).
// docs/git.md describes the behaviour for users.
package reconcile
