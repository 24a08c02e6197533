//! What the model derives from a stored object, computed once per object: states share their
//! objects (`Arc`s of the store), and most steps change one. Per thread, keyed by the object's
//! address; the memo holds a `Weak` of it, so that an address is never reused while memoised
//! (the allocation stays) while the object itself is freed with the last state that holds it.

use promoter::api::ClusterPromotion;
use promoter::fake::{Store, sveltos_cluster_type};
use promoter::hash::{revision_hash, stages_hash};
use promoter::labels::LabelSelector;
use promoter::pass::observe;
use promoter::pass::profiles::main_profile;
use promoter::sveltos::normal_form::normalize;
use serde_json::{Map, Value};
use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::{Arc, Weak};

/// Beyond this many entries a memo starts over (memory, not correctness).
const LIMIT: usize = 50_000;

/// A memo of `T` per object `K` (or per element of one).
pub struct ArcMemo<K, T> {
    map: HashMap<(usize, usize), (Weak<K>, T)>,
}

impl<K, T> Default for ArcMemo<K, T> {
    fn default() -> Self {
        ArcMemo {
            map: HashMap::new(),
        }
    }
}

impl<K, T: Clone> ArcMemo<K, T> {
    /// `f(owner)` for element `index` of `owner`, computed once.
    pub fn get(&mut self, owner: &Arc<K>, index: usize, f: impl FnOnce(&K) -> T) -> T {
        let key = (Arc::as_ptr(owner) as *const () as usize, index);
        if let Some((_, t)) = self.map.get(&key) {
            return t.clone();
        }
        if self.map.len() >= LIMIT {
            self.map.clear();
        }
        let t = f(owner);
        self.map.insert(key, (Arc::downgrade(owner), t.clone()));
        t
    }
}

/// A promotion as the model reads it.
pub struct Promotion {
    pub p: ClusterPromotion,
    /// promoter's revision and stages hashes of its spec.
    pub revision: String,
    pub stages: String,
    /// The content each stage's profile gets from this spec, by stage name.
    pub contents: std::collections::BTreeMap<String, u64>,
}

thread_local! {
    static PROMOTIONS: RefCell<ArcMemo<Value, Option<Arc<Promotion>>>> = RefCell::default();
}

/// The stored promotion `v`, decoded (`None`: it does not decode).
pub fn promotion(arc: &Arc<Value>) -> Option<Arc<Promotion>> {
    PROMOTIONS.with(|m| {
        m.borrow_mut().get(arc, 0, |v| {
            // Decoded once for this and for a pass's list (`decoded`).
            let p: ClusterPromotion = decoded(arc).ok()?;
            let (revision, stages, contents) = derived(v, &p);
            Some(Arc::new(Promotion {
                revision,
                stages,
                contents,
                p,
            }))
        })
    })
}

/// What [`Promotion`] derives from a promotion's spec and labels.
type Derived = (String, String, std::collections::BTreeMap<String, u64>);

thread_local! {
    /// By the spec and labels they are derived from (compared whole): most writes of a promotion
    /// are its status and records, and a model has a handful of distinct specs.
    static DERIVED: RefCell<Vec<((Value, Value), Derived)>> = RefCell::default();
}

/// The revision and stages hashes and the stages' contents of `p` (stored as `v`): functions of
/// its spec (`revision_hash` also of its tenant labels, `main_profile`'s spec of the
/// profileSpec and the stage's selector), computed once per distinct spec and labels.
fn derived(v: &Value, p: &ClusterPromotion) -> Derived {
    let key = (
        v.get("spec").cloned().unwrap_or_default(),
        v.pointer("/metadata/labels").cloned().unwrap_or_default(),
    );
    if let Some(found) = DERIVED.with(|d| {
        d.borrow()
            .iter()
            .find(|(k, _)| *k == key)
            .map(|(_, x)| x.clone())
    }) {
        return found;
    }
    let out: Derived = (
        revision_hash(p),
        stages_hash(&p.spec.stages),
        p.spec
            .stages
            .iter()
            .map(|s| (s.name.clone(), content_of(&main_profile(p, s).spec)))
            .collect(),
    );
    DERIVED.with(|d| {
        let mut d = d.borrow_mut();
        if d.len() >= 256 {
            d.clear();
        }
        d.push((key, out.clone()));
    });
    out
}

thread_local! {
    static NORMAL: RefCell<ArcMemo<Value, Arc<Map<String, Value>>>> = RefCell::default();
}

/// A stored profile's spec in Sveltos' normal form (what its summaries carry).
pub fn normal_form(profile: &Arc<Value>) -> Arc<Map<String, Value>> {
    NORMAL.with(|m| {
        m.borrow_mut().get(profile, 0, |v| {
            Arc::new(normalize(
                v.get("spec")
                    .and_then(Value::as_object)
                    .unwrap_or(&Map::new()),
            ))
        })
    })
}

thread_local! {
    static CONTENT: RefCell<ArcMemo<Value, u64>> = RefCell::default();
}

/// A spec's content: everything but its selector (a profile's revision, whichever stage).
pub fn content_of(spec: &Map<String, Value>) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut m = spec.clone();
    m.remove("clusterSelector");
    let mut h = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_string(&m).unwrap_or_default().hash(&mut h);
    h.finish()
}

/// A stored profile's content.
pub fn profile_content(profile: &Arc<Value>) -> u64 {
    CONTENT.with(|m| {
        m.borrow_mut().get(profile, 0, |v| {
            content_of(
                v.get("spec")
                    .and_then(Value::as_object)
                    .unwrap_or(&Map::new()),
            )
        })
    })
}

/// An object decoded as some type, or why it does not decode.
type Decoded = Result<Arc<dyn std::any::Any>, String>;

thread_local! {
    static DECODED: RefCell<ArcMemo<Value, Decoded>> = RefCell::default();
}

/// A stored object decoded as `observe` decodes it ([`observe::decode`]), once per object: a pass
/// lists every object, and most are the same `Arc` as in the state it came from. (Keyed by the
/// object and its type: a memoised value of another type is decoded again, never misread.)
pub fn decoded<K: serde::de::DeserializeOwned + Clone + 'static>(
    v: &Arc<Value>,
) -> Result<K, String> {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    std::any::TypeId::of::<K>().hash(&mut h);
    let kind = h.finish() as usize;
    let found = DECODED.with(|m| {
        m.borrow_mut().get(v, kind, |v| {
            observe::decode::<K>(v).map(|k| Arc::new(k) as Arc<dyn std::any::Any>)
        })
    });
    match found {
        Ok(any) => match any.downcast_ref::<K>() {
            Some(k) => Ok(k.clone()),
            None => observe::decode(v),
        },
        Err(e) => Err(e),
    }
}

/// Two objects (weakly held, so that their addresses are not reused) and what was found of them.
type Pair = (Weak<Value>, Weak<Value>, bool);

thread_local! {
    static PAIRS: RefCell<HashMap<(usize, usize), Pair>> = RefCell::default();
}

/// `f(a, b)` for two stored objects, computed once per pair (a summary judged against its
/// profile: most steps change neither).
pub fn per_pair(
    a: &Arc<Value>,
    b: &Arc<Value>,
    f: impl FnOnce(&Arc<Value>, &Value) -> bool,
) -> bool {
    let key = (Arc::as_ptr(a) as usize, Arc::as_ptr(b) as usize);
    if let Some(t) = PAIRS.with(|m| m.borrow().get(&key).map(|(_, _, t)| *t)) {
        return t;
    }
    let t = f(a, b);
    PAIRS.with(|m| {
        let mut m = m.borrow_mut();
        if m.len() >= LIMIT {
            m.clear();
        }
        m.insert(key, (Arc::downgrade(a), Arc::downgrade(b), t));
    });
    t
}

/// The clusters a selector keeps, by the selector and the number of stored clusters.
type Selections = Vec<((LabelSelector, usize), Arc<Vec<String>>)>;

thread_local! {
    /// By the selector (compared whole) and the number of clusters: the model has a handful of
    /// selectors, and its clusters never change within an exploration (between two on one
    /// thread, only `clusters=` adds one).
    static SELECTED: RefCell<Selections> = RefCell::default();
}

/// The names of the stored SveltosClusters `keep` keeps, once per distinct `selector` (`keep`
/// must be a function of the selector and the cluster: the model's clusters never change).
pub fn selected(
    store: &Store,
    selector: &LabelSelector,
    keep: impl Fn(&Value) -> bool,
) -> Arc<Vec<String>> {
    let rt = sveltos_cluster_type();
    let count = store.stored(&rt).count();
    if let Some(found) = SELECTED.with(|m| {
        m.borrow()
            .iter()
            .find(|((s, n), _)| s == selector && *n == count)
            .map(|(_, names)| names.clone())
    }) {
        return found;
    }
    let names: Arc<Vec<String>> = Arc::new(
        store
            .stored(&rt)
            .filter(|c| keep(c))
            .map(|c| {
                c.pointer("/metadata/name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            })
            .collect(),
    );
    SELECTED.with(|m| {
        let mut m = m.borrow_mut();
        if m.len() >= 256 {
            m.clear();
        }
        m.push(((selector.clone(), count), names.clone()));
    });
    names
}
