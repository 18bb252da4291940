//! Prints the compiled size of each built-in profile.
use sandbox_policy::profile::Profile;
fn main() {
    for name in Profile::builtin_names() {
        let p = Profile::builtin(name).unwrap();
        if let Some(pol) = p.policy(sandbox_policy::NATIVE, None).unwrap() {
            let prog = sandbox_policy::bpf::compile_vec(&pol).unwrap();
            println!("{name}: {} insns, {} rules", prog.len(), pol.rules().len());
        } else {
            println!("{name}: none");
        }
    }
}
