//! What statements run on: a pooled connection, or a transaction on one.
//! deadpool-postgres's own `GenericClient` is sealed to its own pool's
//! connections, and the pool's connections are Berth's (crate::conn), so
//! the store has this one, with the same methods.

use std::future::Future;

use deadpool_postgres::{ClientWrapper, Transaction};
use tokio_postgres::types::ToSql;
use tokio_postgres::{Error, Row, Statement, ToStatement};

use crate::conn::Checkout;

type Params<'p> = &'p [&'p (dyn ToSql + Sync)];

/// A connection or a transaction, for statements that run on either.
pub(crate) trait GenericClient: Sync {
    fn execute<T>(&self, statement: &T, params: Params<'_>) -> impl Future<Output = Result<u64, Error>> + Send
    where
        T: ?Sized + ToStatement + Sync;

    fn query<T>(&self, statement: &T, params: Params<'_>) -> impl Future<Output = Result<Vec<Row>, Error>> + Send
    where
        T: ?Sized + ToStatement + Sync;

    fn query_one<T>(&self, statement: &T, params: Params<'_>) -> impl Future<Output = Result<Row, Error>> + Send
    where
        T: ?Sized + ToStatement + Sync;

    fn query_opt<T>(
        &self,
        statement: &T,
        params: Params<'_>,
    ) -> impl Future<Output = Result<Option<Row>, Error>> + Send
    where
        T: ?Sized + ToStatement + Sync;

    /// Prepared once per connection (deadpool-postgres's statement cache).
    fn prepare_cached(&self, sql: &str) -> impl Future<Output = Result<Statement, Error>> + Send;

    fn batch_execute(&self, sql: &str) -> impl Future<Output = Result<(), Error>> + Send;
}

/// Each method as the connection's own (tokio-postgres's client under it,
/// but for the statement cache).
macro_rules! generic_client {
    ($t:ty) => {
        impl GenericClient for $t {
            fn execute<T>(&self, statement: &T, params: Params<'_>) -> impl Future<Output = Result<u64, Error>> + Send
            where
                T: ?Sized + ToStatement + Sync,
            {
                tokio_postgres::Client::execute(self, statement, params)
            }

            fn query<T>(
                &self,
                statement: &T,
                params: Params<'_>,
            ) -> impl Future<Output = Result<Vec<Row>, Error>> + Send
            where
                T: ?Sized + ToStatement + Sync,
            {
                tokio_postgres::Client::query(self, statement, params)
            }

            fn query_one<T>(&self, statement: &T, params: Params<'_>) -> impl Future<Output = Result<Row, Error>> + Send
            where
                T: ?Sized + ToStatement + Sync,
            {
                tokio_postgres::Client::query_one(self, statement, params)
            }

            fn query_opt<T>(
                &self,
                statement: &T,
                params: Params<'_>,
            ) -> impl Future<Output = Result<Option<Row>, Error>> + Send
            where
                T: ?Sized + ToStatement + Sync,
            {
                tokio_postgres::Client::query_opt(self, statement, params)
            }

            fn prepare_cached(&self, sql: &str) -> impl Future<Output = Result<Statement, Error>> + Send {
                ClientWrapper::prepare_cached(self, sql)
            }

            fn batch_execute(&self, sql: &str) -> impl Future<Output = Result<(), Error>> + Send {
                tokio_postgres::Client::batch_execute(self, sql)
            }
        }
    };
}

generic_client!(ClientWrapper);
generic_client!(Checkout);

// Through to tokio-postgres's transaction by its own type's path:
// deadpool's has no `query` and the like of its own, so a path through it
// would find this trait's and call itself.
impl GenericClient for Transaction<'_> {
    fn execute<T>(&self, statement: &T, params: Params<'_>) -> impl Future<Output = Result<u64, Error>> + Send
    where
        T: ?Sized + ToStatement + Sync,
    {
        tokio_postgres::Transaction::execute(self, statement, params)
    }

    fn query<T>(&self, statement: &T, params: Params<'_>) -> impl Future<Output = Result<Vec<Row>, Error>> + Send
    where
        T: ?Sized + ToStatement + Sync,
    {
        tokio_postgres::Transaction::query(self, statement, params)
    }

    fn query_one<T>(&self, statement: &T, params: Params<'_>) -> impl Future<Output = Result<Row, Error>> + Send
    where
        T: ?Sized + ToStatement + Sync,
    {
        tokio_postgres::Transaction::query_one(self, statement, params)
    }

    fn query_opt<T>(&self, statement: &T, params: Params<'_>) -> impl Future<Output = Result<Option<Row>, Error>> + Send
    where
        T: ?Sized + ToStatement + Sync,
    {
        tokio_postgres::Transaction::query_opt(self, statement, params)
    }

    fn prepare_cached(&self, sql: &str) -> impl Future<Output = Result<Statement, Error>> + Send {
        Transaction::prepare_cached(self, sql)
    }

    fn batch_execute(&self, sql: &str) -> impl Future<Output = Result<(), Error>> + Send {
        tokio_postgres::Transaction::batch_execute(self, sql)
    }
}
