//! The merge lane's order, as data: the chain of trials expected to merge one after another
//! (stale winners' rechecks, and winners waiting their turn), each measured against the commit
//! the one before it would make the head. New trials start on the chain's tip, so that when the
//! chain merges they were measured against the head they merge onto; nothing merges unless its
//! incumbent is the head at that moment.

/// A trial as the lane sees it: its id and the two commits it measures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    pub id: String,
    pub incumbent: String,
    pub candidate: String,
}

/// What becomes of a finished winner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// It is the chain's front and was measured against the head: merge it now.
    Merge,
    /// It was measured against the tip: it joins the chain and merges when its turn comes.
    Join,
    /// It was measured against a commit that may still become the head (the head, while the chain
    /// ahead of it is undecided, or a candidate in the chain): it waits.
    Wait,
    /// Its incumbent can no longer become the head: it must be rechecked on the tip.
    Stale,
}

/// The chain: `links[0]` was measured against the head, `links[i]` against `links[i - 1]`'s
/// candidate.
#[derive(Debug, Clone, Default)]
pub struct Lane {
    links: Vec<Link>,
}

impl Lane {
    /// The commit the head will be once the whole chain merges: where trials start.
    pub fn tip<'a>(&'a self, head: &'a str) -> &'a str {
        self.links.last().map_or(head, |l| l.candidate.as_str())
    }

    pub fn is_empty(&self) -> bool {
        self.links.is_empty()
    }

    pub fn len(&self) -> usize {
        self.links.len()
    }

    pub fn contains(&self, id: &str) -> bool {
        self.position(id).is_some()
    }

    pub fn position(&self, id: &str) -> Option<usize> {
        self.links.iter().position(|l| l.id == id)
    }

    pub fn ids(&self) -> impl Iterator<Item = &str> {
        self.links.iter().map(|l| l.id.as_str())
    }

    /// Append a trial measured against the tip (a recheck started there, or a winner that joins).
    pub fn push(&mut self, link: Link) {
        debug_assert!(self.links.last().is_none_or(|l| l.candidate == link.incumbent), "a link must start on the tip");
        self.links.push(link);
    }

    /// The front merged: the chain now starts at the new head.
    pub fn pop_front(&mut self) -> Option<Link> {
        (!self.links.is_empty()).then(|| self.links.remove(0))
    }

    /// The link at `at` was not kept (or was lost): it and every link after it (measured against
    /// a commit that will now never be the head) leave the chain, in order.
    pub fn cut(&mut self, at: usize) -> Vec<Link> {
        self.links.split_off(at.min(self.links.len()))
    }

    /// Where a finished winner goes, with the head as it is now.
    pub fn place(&self, head: &str, w: &Link) -> Place {
        if let Some(i) = self.position(&w.id) {
            return match (i, w.incumbent == head) {
                (0, true) => Place::Merge,
                // A link ahead of it is undecided.
                (_, false) if i > 0 => Place::Wait,
                // The chain's front measured against something other than the head: the head
                // moved under it (cannot happen while only the lane merges); recheck it.
                _ => Place::Stale,
            };
        }
        if w.incumbent == self.tip(head) {
            Place::Join
        } else if w.incumbent == head || self.links.iter().any(|l| l.candidate == w.incumbent) {
            Place::Wait
        } else {
            Place::Stale
        }
    }

    /// Rebuild the chain from journaled rechecks (`(id, incumbent, candidate)`) after a restart:
    /// from the head, each recheck measured against the chain's tip, in turn.
    pub fn rebuild<'a>(head: &str, rechecks: impl Iterator<Item = &'a Link> + Clone) -> Lane {
        let mut lane = Lane::default();
        loop {
            let tip = lane.tip(head).to_string();
            let Some(next) = rechecks.clone().find(|l| l.incumbent == tip && !lane.contains(&l.id)) else { return lane };
            lane.push(next.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(id: &str, incumbent: &str, candidate: &str) -> Link {
        Link { id: id.into(), incumbent: incumbent.into(), candidate: candidate.into() }
    }

    #[test]
    fn an_empty_lane_merges_a_winner_on_the_head_and_makes_any_other_stale() {
        let lane = Lane::default();
        assert_eq!(lane.tip("H"), "H");
        // Not in the chain, measured against the tip (the head): it joins, then merges as front.
        assert_eq!(lane.place("H", &link("t1", "H", "A")), Place::Join);
        assert_eq!(lane.place("H", &link("t1", "OLD", "A")), Place::Stale);
        let mut lane = lane;
        lane.push(link("t1", "H", "A"));
        assert_eq!(lane.place("H", &link("t1", "H", "A")), Place::Merge);
    }

    #[test]
    fn trials_started_on_the_tip_wait_for_the_chain_and_merge_after_it() {
        let mut lane = Lane::default();
        lane.push(link("r1", "H", "A"));
        lane.push(link("r2", "A", "B"));
        assert_eq!(lane.tip("H"), "B");
        // A second link cannot merge before the first, even once it is decided.
        assert_eq!(lane.place("H", &link("r2", "A", "B")), Place::Wait);
        // A winner on the tip joins; one on a commit in the chain, or on the head, waits.
        assert_eq!(lane.place("H", &link("t5", "B", "C")), Place::Join);
        assert_eq!(lane.place("H", &link("t6", "A", "D")), Place::Wait);
        assert_eq!(lane.place("H", &link("t7", "H", "E")), Place::Wait);
        assert_eq!(lane.place("H", &link("t8", "G", "F")), Place::Stale);
        // The front merges; the next link is then measured against the new head.
        assert_eq!(lane.place("H", &link("r1", "H", "A")), Place::Merge);
        assert_eq!(lane.pop_front().map(|l| l.id), Some("r1".into()));
        assert_eq!(lane.place("A", &link("r2", "A", "B")), Place::Merge);
        // t7 measured against the old head: stale now.
        assert_eq!(lane.place("A", &link("t7", "H", "E")), Place::Stale);
    }

    #[test]
    fn a_link_not_kept_takes_every_link_after_it_out_of_the_chain() {
        let mut lane = Lane::default();
        lane.push(link("r1", "H", "A"));
        lane.push(link("r2", "A", "B"));
        lane.push(link("t3", "B", "C"));
        let gone: Vec<String> = lane.cut(1).into_iter().map(|l| l.id).collect();
        assert_eq!(gone, ["r2", "t3"]);
        assert_eq!(lane.tip("H"), "A");
        // A winner measured against B (a candidate that will never be the head) is stale.
        assert_eq!(lane.place("H", &link("t9", "B", "X")), Place::Stale);
        assert!(lane.cut(5).is_empty());
        assert_eq!(lane.cut(0).len(), 1);
        assert!(lane.is_empty());
    }

    #[test]
    fn a_restart_rebuilds_the_chain_from_the_journaled_rechecks_in_order() {
        let journaled = [link("r3", "B", "C"), link("r1", "H", "A"), link("rx", "Z", "Y"), link("r2", "A", "B")];
        let lane = Lane::rebuild("H", journaled.iter());
        assert_eq!(lane.ids().collect::<Vec<_>>(), ["r1", "r2", "r3"]);
        assert_eq!(lane.tip("H"), "C");
        // Nothing measured against the head: an empty chain.
        assert!(Lane::rebuild("Q", journaled.iter()).is_empty());
    }
}
