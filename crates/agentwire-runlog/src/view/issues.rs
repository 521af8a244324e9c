//! Issues grouped by code: [`IssueGroups`] counts them as they pass by, so the terminal views
//! can list one line per code however many issues a log has.

use super::level_index;
use crate::coerce::{Issue, IssueLevel};

/// Most line ranges a grouped issue line lists; the rest is counted.
pub const MAX_GROUP_RANGES: usize = 8;

/// The issues of one code: how many, and which lines they touched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IssueGroup {
    /// The level of the code's issues (a code has one level).
    pub level: IssueLevel,
    /// The code.
    pub code: &'static str,
    /// Issues of the code.
    pub count: usize,
    /// Distinct lines they touched.
    pub lines: usize,
    /// The first [`MAX_GROUP_RANGES`] runs of consecutive lines, `(first, last)`.
    pub ranges: Vec<(usize, usize)>,
    /// The message of the first issue of the code.
    pub example: String,
}

/// Groups issues by code as they pass by, in the order each code first appears (issues come
/// sorted by line). Memory is bounded by the number of codes, whatever the number of issues.
#[derive(Debug, Default)]
pub struct IssueGroups {
    pub(super) groups: Vec<(IssueGroup, usize)>,
    /// Issues per level, in [`LEVELS`](super::LEVELS) order.
    counts: [usize; 4],
}

impl IssueGroups {
    /// Counts one issue.
    pub fn push(&mut self, issue: &Issue) {
        self.counts[level_index(issue.level)] += 1;
        let at = match self
            .groups
            .iter()
            .position(|(g, _)| g.code == issue.code && g.level == issue.level)
        {
            Some(at) => at,
            None => {
                self.groups.push((
                    IssueGroup {
                        level: issue.level,
                        code: issue.code,
                        count: 0,
                        lines: 0,
                        ranges: Vec::new(),
                        example: issue.message.clone(),
                    },
                    usize::MAX,
                ));
                self.groups.len() - 1
            }
        };
        let (group, last) = &mut self.groups[at];
        group.count += 1;
        if *last == issue.line {
            return;
        }
        group.lines += 1;
        let room = group.ranges.len() < MAX_GROUP_RANGES;
        match group.ranges.last_mut() {
            Some(range) if *last == range.1 && range.1 + 1 == issue.line => range.1 = issue.line,
            _ if room => group.ranges.push((issue.line, issue.line)),
            _ => {}
        }
        *last = issue.line;
    }

    /// Issues of `level` counted so far.
    pub fn count(&self, level: IssueLevel) -> usize {
        self.counts[level_index(level)]
    }

    /// The groups.
    pub fn groups(&self) -> impl Iterator<Item = &IssueGroup> {
        self.groups.iter().map(|(g, _)| g)
    }
}

/// The issues grouped by code (see [`IssueGroups`]).
pub fn group_issues<'a>(issues: impl IntoIterator<Item = &'a Issue>) -> Vec<IssueGroup> {
    let mut groups = IssueGroups::default();
    for issue in issues {
        groups.push(issue);
    }
    groups.groups.into_iter().map(|(g, _)| g).collect()
}
