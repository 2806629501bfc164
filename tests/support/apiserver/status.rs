//! API errors and the `Status` objects the real server answers with.

use serde_json::{json, Value};

use super::resources::ResourceInfo;

/// A failed API call: the HTTP code and the `Status` fields the real API server would send.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{code} {reason}: {message}")]
pub struct ApiError {
    pub code: u16,
    pub reason: String,
    pub message: String,
    /// `details` of the Status (name, group, kind, causes), if any.
    pub details: Option<Value>,
}

impl ApiError {
    pub fn new(code: u16, reason: &str, message: impl Into<String>) -> Self {
        Self {
            code,
            reason: reason.to_string(),
            message: message.into(),
            details: None,
        }
    }

    fn with_details(mut self, res: &ResourceInfo, name: &str) -> Self {
        self.details = Some(json!({"name": name, "group": res.group, "kind": res.plural}));
        self
    }

    pub fn not_found(res: &ResourceInfo, name: &str) -> Self {
        let msg = format!("{} \"{name}\" not found", resource_label(res));
        Self::new(404, "NotFound", msg).with_details(res, name)
    }

    /// The answer for a path that names no served resource.
    pub fn no_such_resource() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    }

    pub fn already_exists(res: &ResourceInfo, name: &str) -> Self {
        let msg = format!("{} \"{name}\" already exists", resource_label(res));
        Self::new(409, "AlreadyExists", msg).with_details(res, name)
    }

    pub fn conflict(res: &ResourceInfo, name: &str, why: &str) -> Self {
        let msg = format!(
            "Operation cannot be fulfilled on {} \"{name}\": {why}",
            resource_label(res)
        );
        Self::new(409, "Conflict", msg).with_details(res, name)
    }

    /// The optimistic-concurrency failure, worded as the real server words it.
    pub fn stale(res: &ResourceInfo, name: &str) -> Self {
        Self::conflict(
            res,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    pub fn invalid(res: &ResourceInfo, name: &str, field: &str, detail: &str) -> Self {
        let msg = format!("{} \"{name}\" is invalid: {field}: {detail}", res.kind);
        let mut e = Self::new(422, "Invalid", msg);
        e.details = Some(json!({
            "name": name, "group": res.group, "kind": res.kind,
            "causes": [{"reason": "FieldValueInvalid", "message": detail, "field": field}],
        }));
        e
    }

    /// A 422 about the request's options (PatchOptions, DeleteOptions).
    pub fn invalid_options(detail: &str) -> Self {
        Self::new(
            422,
            "Invalid",
            format!("PatchOptions.meta.k8s.io \"\" is invalid: {detail}"),
        )
    }

    pub fn unsupported_patch(content_type: &str) -> Self {
        let accepted = "application/json-patch+json, application/merge-patch+json, \
                        application/apply-patch+yaml, application/strategic-merge-patch+json";
        let msg = format!(
            "the body of the request was in an unknown format - accepted media types include: {accepted}; got {content_type:?}"
        );
        Self::new(415, "UnsupportedMediaType", msg)
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", message)
    }

    pub fn method_not_allowed() -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )
    }

    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(500, "InternalError", message)
    }

    /// The 410 a watch or list gets for a resourceVersion older than the retained history.
    pub fn expired(message: impl Into<String>) -> Self {
        Self::new(410, "Expired", message)
    }

    /// A generic error for an injected fault with the given code.
    pub fn injected(code: u16) -> Self {
        let reason = match code {
            400 => "BadRequest",
            403 => "Forbidden",
            404 => "NotFound",
            409 => "Conflict",
            410 => "Gone",
            422 => "Invalid",
            429 => "TooManyRequests",
            503 => "ServiceUnavailable",
            504 => "Timeout",
            _ => "InternalError",
        };
        Self::new(code, reason, format!("injected fault: {reason}"))
    }

    /// The `Status` object for this error.
    pub fn to_status(&self) -> Value {
        let mut s = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if let Some(d) = &self.details {
            s["details"] = d.clone();
        }
        s
    }
}

/// `pods`, or `nodeclaims.karpenter.sh`, as the real server names a resource in messages.
fn resource_label(res: &ResourceInfo) -> String {
    res.qualified()
}

/// A `Status` of success with the given code (eviction, immediate deletion).
pub fn success(code: u16, details: Option<Value>) -> Value {
    let mut s = json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": code});
    if let Some(d) = details {
        s["details"] = d;
    }
    s
}

pub type ApiResult<T> = Result<T, ApiError>;
