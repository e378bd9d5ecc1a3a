//! Who each request belongs to and how urgent it is: its tenant, SLO class, numeric priority
//! and SLO target, from the clients of a workload spec or the fields of a JSONL line.
//!
//! Memory stays small: the distinct combinations ("profiles") are stored once, each request
//! keeps a 4-byte index into them.

use crate::Nanos;
use std::collections::BTreeMap;

/// What a request carries beyond its tenant and class.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct RequestExtras {
    /// Its own priority (higher is more urgent), replacing its class's.
    pub priority: Option<i32>,
    /// Its SLO target: the time from arrival by which it should be served (its deadline is
    /// arrival + target).
    pub slo_target_ns: Option<Nanos>,
}

/// A request's tenant and class (indices into the name tables) and its extras.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Profile {
    /// Index into [`RequestClasses::tenants`].
    pub tenant: u32,
    /// Index into [`RequestClasses::classes`].
    pub class: u32,
    /// Its own priority and SLO target, if given.
    pub extras: RequestExtras,
}

/// The tenant, SLO class and extras of every request of a workload, by request id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestClasses {
    tenants: Vec<String>,
    classes: Vec<String>,
    profiles: Vec<Profile>,
    index: BTreeMap<Profile, u32>,
    /// Profile index by request id; `NONE` for an id no client gave.
    of: Vec<u32>,
}

const NONE: u32 = u32::MAX;

impl RequestClasses {
    /// Gives the `count` request ids from `first_id` to `tenant` and `class`.
    pub fn assign(&mut self, first_id: u64, count: u32, tenant: &str, class: &str) {
        self.assign_with(first_id, count, tenant, class, RequestExtras::default());
    }

    /// Gives the `count` request ids from `first_id` to `tenant` and `class`, with `extras`.
    pub fn assign_with(
        &mut self,
        first_id: u64,
        count: u32,
        tenant: &str,
        class: &str,
        extras: RequestExtras,
    ) {
        let profile = Profile {
            tenant: intern(&mut self.tenants, tenant),
            class: intern(&mut self.classes, class),
            extras,
        };
        let next = u32::try_from(self.profiles.len()).unwrap_or(NONE - 1);
        let at = *self.index.entry(profile).or_insert(next);
        if at == next {
            self.profiles.push(profile);
        }
        let end = first_id as usize + count as usize;
        if self.of.len() < end {
            self.of.resize(end, NONE);
        }
        self.of[first_id as usize..end].fill(at);
    }

    /// The tenant and class indices of request `id`, if it has them.
    pub fn of(&self, id: u64) -> Option<(u32, u32)> {
        self.profile(id).map(|p| (p.tenant, p.class))
    }

    /// The profile of request `id`, if it has one.
    pub fn profile(&self, id: u64) -> Option<Profile> {
        let at = *self.of.get(id as usize)?;
        self.profiles.get(at as usize).copied()
    }

    /// Tenant names, by index (first seen first).
    pub fn tenants(&self) -> &[String] {
        &self.tenants
    }

    /// SLO class names, by index (first seen first).
    pub fn classes(&self) -> &[String] {
        &self.classes
    }
}

/// The index of `name` in `names`, added at the end when new.
fn intern(names: &mut Vec<String>, name: &str) -> u32 {
    let at = names.iter().position(|n| n == name).unwrap_or_else(|| {
        names.push(name.to_owned());
        names.len() - 1
    });
    u32::try_from(at).unwrap_or(u32::MAX - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_get_their_clients_tenant_and_class() {
        let mut c = RequestClasses::default();
        c.assign(0, 2, "bulk", "batch");
        c.assign(2, 1, "web", "critical");
        c.assign(3, 3, "bulk", "batch");
        assert_eq!(c.of(0), Some((0, 0)));
        assert_eq!(c.of(2), Some((1, 1)));
        assert_eq!(c.of(5), Some((0, 0)));
        assert_eq!(c.of(6), None);
        assert_eq!(c.tenants(), ["bulk", "web"]);
        assert_eq!(c.classes(), ["batch", "critical"]);
    }

    #[test]
    fn extras_are_stored_once_per_distinct_profile() {
        let mut c = RequestClasses::default();
        let urgent = RequestExtras {
            priority: Some(7),
            slo_target_ns: Some(1_000),
        };
        c.assign_with(0, 1, "a", "critical", urgent);
        c.assign(1, 1, "a", "critical");
        c.assign_with(2, 1, "a", "critical", urgent);
        assert_eq!(c.profile(0).map(|p| p.extras), Some(urgent));
        assert_eq!(
            c.profile(1).map(|p| p.extras),
            Some(RequestExtras::default())
        );
        assert_eq!(c.profiles.len(), 2);
        assert_eq!(c.of(2), Some((0, 0)));
    }
}
