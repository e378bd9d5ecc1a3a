//! Who each request belongs to: its tenant and SLO class, from the clients of a workload spec.

/// The tenant and SLO class of every request of a workload, by request id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestClasses {
    tenants: Vec<String>,
    classes: Vec<String>,
    /// `(tenant, class)` indices by request id; `NONE` for an id no client gave.
    of: Vec<(u32, u32)>,
}

const NONE: (u32, u32) = (u32::MAX, u32::MAX);

impl RequestClasses {
    /// Gives the `count` request ids from `first_id` to `tenant` and `class`.
    pub fn assign(&mut self, first_id: u64, count: u32, tenant: &str, class: &str) {
        let pair = (
            intern(&mut self.tenants, tenant),
            intern(&mut self.classes, class),
        );
        let end = first_id as usize + count as usize;
        if self.of.len() < end {
            self.of.resize(end, NONE);
        }
        self.of[first_id as usize..end].fill(pair);
    }

    /// The tenant and class indices of request `id`, if it has them.
    pub fn of(&self, id: u64) -> Option<(u32, u32)> {
        self.of.get(id as usize).copied().filter(|&p| p != NONE)
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
}
