//! An event's stream (the aggregate it advances) and its parts in the log
//! (`type` and `data`).

use super::Event;

impl Event {
    /// The stream this event belongs to: the aggregate whose version it advances.
    pub fn stream(&self) -> String {
        match self {
            Event::ResourceClassCreated { name } | Event::ResourceClassDeleted { name } => {
                format!("resource_class:{name}")
            }
            Event::ResourceClassRenamed { from, .. } => format!("resource_class:{from}"),
            Event::TraitCreated { name } | Event::TraitDeleted { name } => format!("trait:{name}"),
            Event::ProviderCreated { uuid, .. }
            | Event::ProviderUpdated { uuid, .. }
            | Event::ProviderDeleted { uuid } => format!("provider:{uuid}"),
            Event::InventoriesReplaced { provider, .. }
            | Event::ProviderTraitsReplaced { provider, .. }
            | Event::ProviderAggregatesReplaced { provider, .. } => format!("provider:{provider}"),
            Event::AllocationsReplaced { consumer, .. } => format!("consumer:{consumer}"),
            Event::LeaseCreated { lease, .. } | Event::LeaseUpdated { lease, .. } => format!("lease:{}", lease.id),
            Event::LeaseDeleted { id, .. } | Event::LeaseStatusChanged { id, .. } => format!("lease:{id}"),
            Event::LeaseSplit { lease, .. } => format!("lease:{}", lease.id),
            Event::LeaseTransferOffered { id, .. }
            | Event::LeaseTransferWithdrawn { id, .. }
            | Event::LeaseTransferred { id, .. } => format!("lease:{id}"),
            Event::ReservationStatusChanged { lease, .. }
            | Event::LeaseEventChanged { lease, .. }
            | Event::LeaseEventClaimed { lease, .. }
            | Event::LeaseEventClaimRenewed { lease, .. }
            | Event::LeaseEventRetrying { lease, .. }
            | Event::LeaseEventFinished { lease, .. }
            | Event::LeaseEventRetried { lease, .. }
            | Event::LeaseEventCancelled { lease, .. }
            | Event::LeaseEventFired { lease, .. } => format!("lease:{lease}"),
            Event::LeaseRecovered { id, .. } | Event::LeaseShared { id, .. } => format!("lease:{id}"),
            Event::UpdateHookFinished { lease, .. } => format!("lease:{lease}"),
            Event::ManagerPaused { .. } | Event::ManagerResumed { .. } => "manager".to_string(),
            Event::HostEnrolled { provider, .. }
            | Event::HostUpdated { provider, .. }
            | Event::HostRemoved { provider, .. }
            | Event::HostHeld { provider, .. }
            | Event::HostHoldReleased { provider, .. } => format!("host:{provider}"),
            Event::HostPropertyChanged { name, .. } => format!("host_property:{name}"),
            Event::HostDisabled { provider, .. } => format!("host:{provider}"),
            Event::MaintenanceScheduled { id, .. } | Event::MaintenanceCancelled { id, .. } => {
                format!("maintenance:{id}")
            }
            Event::ReservationHealed { lease, .. }
            | Event::ReservationUnhealed { lease, .. }
            | Event::HealHookFinished { lease, .. } => format!("lease:{lease}"),
            Event::ReservationDrawn { slot, .. } => format!("slot:{slot}"),
            Event::QuotaSet { scope, .. } | Event::QuotaUnset { scope, .. } | Event::QuotaOverLimit { scope, .. } => {
                scope.stream()
            }
            Event::RequestKeyed { caller, key, .. } => format!("request:{caller}:{key}"),
            Event::CapacityLent { consumer, .. }
            | Event::LoanReturned { consumer, .. }
            | Event::LoanCut { consumer, .. }
            | Event::ReclaimClaimed { consumer, .. }
            | Event::ReclaimFinished { consumer, .. } => format!("consumer:{consumer}"),
        }
    }

    /// Splits into the log's `type` column and its JSON `data`.
    pub fn to_parts(&self) -> (String, serde_json::Value) {
        let mut v = serde_json::to_value(self).expect("events serialize");
        let obj = v.as_object_mut().expect("events are tagged objects");
        let ty = obj.remove("type").and_then(|t| t.as_str().map(str::to_owned)).unwrap_or_default();
        let data = obj.remove("data").unwrap_or(serde_json::Value::Null);
        (ty, data)
    }

    /// The inverse of [`Event::to_parts`].
    pub fn from_parts(ty: &str, data: serde_json::Value) -> Result<Event, serde_json::Error> {
        serde_json::from_value(serde_json::json!({ "type": ty, "data": data }))
    }
}
