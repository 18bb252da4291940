//! The `outputSchema` of the tools: the exec result JSON (`ExecResult`, docs/exec.md
//! "Result"), which a call that ran returns as `structuredContent`.
//!
//! Written by hand (the project derives no schemas); a test holds its properties to the
//! fields a real result serializes, so the two cannot drift, and the SDK tests check real
//! results against it.

use serde_json::{json, Value};

/// The schema of `structuredContent`.
pub fn output() -> Value {
    let nullable_object = json!({"type": ["object", "null"]});
    json!({
        "type": "object",
        "description": "The exec result (docs/exec.md, \"Result\").",
        "properties": {
            "program": {"type": "string", "description": "The file that ran."},
            "exit_code": {"type": ["integer", "null"]},
            "signal": {"type": ["integer", "null"]},
            "stdout": {"type": "string"},
            "stderr": {"type": "string"},
            "stdout_truncated": {"type": "boolean"},
            "stderr_truncated": {"type": "boolean"},
            "duration_s": {"type": "number"},
            "timed_out": {"type": "boolean"},
            "cancelled": {"type": "boolean"},
            "violation": {
                "type": ["object", "null"],
                "description": "The refused call that ended the program (--on-violation kill)."
            },
            "violations": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "syscall": {"type": "string"},
                        "number": {"type": ["integer", "null"]},
                        "count": {"type": "integer"},
                        "program": {"type": ["string", "null"]},
                        "profile": {"type": "string"},
                        "hint": {"type": "string"},
                        "change": {"type": ["string", "null"]}
                    },
                    "required": ["syscall", "count", "profile", "hint"]
                }
            },
            "violations_omitted": {"type": "integer"},
            "sandboxed": {
                "type": "object",
                "properties": {"filter": {"type": "string"}, "profile": {"type": "string"}},
                "required": ["filter", "profile"]
            },
            "tier": {"type": "string", "enum": ["isolated", "contained", "filtered", "unconfined"]},
            "warnings": {"type": "array", "items": {"type": "string"}},
            "landlock": nullable_object,
            "limits_hit": {"type": "array", "items": {"type": "string"}},
            "leaks": {"type": "array", "items": {"type": "object"}},
            "isolation": nullable_object,
            "network": {"type": "object"},
            "refusals": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "path": {"type": "string"},
                        "destination": {"type": "string"},
                        "operation": {"type": "string"},
                        "rule": {"type": "string"},
                        "allow": {"type": ["string", "null"]}
                    },
                    "required": ["rule"]
                }
            },
            "refusals_omitted": {"type": "integer"}
        },
        "required": [
            "program", "exit_code", "signal", "stdout", "stderr", "timed_out", "duration_s",
            "violation", "violations", "sandboxed", "tier", "warnings", "refusals"
        ]
    })
}

#[cfg(test)]
mod tests {
    /// The schema names exactly the fields a result serializes.
    #[test]
    fn the_schema_has_the_fields_of_a_result() {
        let r = crate::exec::exec(&crate::exec::Request::new(["/bin/true"])).unwrap();
        let v = serde_json::to_value(&r).unwrap();
        let mut got: Vec<&String> = v.as_object().unwrap().keys().collect();
        let schema = super::output();
        let mut want: Vec<&String> = schema["properties"].as_object().unwrap().keys().collect();
        got.sort();
        want.sort();
        assert_eq!(got, want);
        assert!(v["tier"].is_string());
        assert!(v["sandboxed"]["filter"].is_string());
    }
}
