//! [`OAuth`], the OAuth client of one process: what its logins
//! (`login.rs`) and the tokens of its calls (`refresh.rs`) share.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use executor_outbound::HttpClient;
use executor_store::ConnectionStore;
use executor_store::secrets::SecretKey;

use crate::http::OAuthHttp;

/// The OAuth client of one process: logins and the tokens of calls.
pub struct OAuth {
    pub(crate) store: Arc<dyn ConnectionStore>,
    pub(crate) key: Arc<SecretKey>,
    pub(crate) http: OAuthHttp,
    /// Names this process in a refresh lease.
    pub(crate) holder: String,
    /// One lock per connection being refreshed in this process.
    pub(crate) flights: Mutex<HashMap<(String, String), Flight>>,
}

/// The turn of one connection's refresh in this process.
pub(crate) type Flight = Arc<tokio::sync::Mutex<()>>;

impl OAuth {
    pub fn new(store: Arc<dyn ConnectionStore>, key: Arc<SecretKey>, http: HttpClient) -> Self {
        OAuth {
            store,
            key,
            http: OAuthHttp::new(http),
            holder: format!(
                "{}-{}",
                std::process::id(),
                executor_store::tokens::random_id(8)
            ),
            flights: Mutex::new(HashMap::new()),
        }
    }
}
