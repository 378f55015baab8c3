// The throw-away certificates of servers/tls_certificates.h verify as their names say, so a TLS
// test that fails on one of them fails for the reason it means to test.
#include "lockstep/servers/tls_certificates.h"

#include <gtest/gtest.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

namespace lockstep {
namespace {

std::unique_ptr<X509, decltype(&X509_free)> read_cert(const std::string& path) {
    std::FILE* f = std::fopen(path.c_str(), "r");
    EXPECT_NE(f, nullptr) << path;
    X509* cert = f != nullptr ? PEM_read_X509(f, nullptr, nullptr, nullptr) : nullptr;
    if (f != nullptr) std::fclose(f);
    return {cert, &X509_free};
}

// X509_V_OK, or the verification error of `cert_file` against the CA in `ca_file`, for `host`.
int verify(const std::string& ca_file, const std::string& cert_file, const char* host) {
    auto cert = read_cert(cert_file);
    std::unique_ptr<X509_STORE, decltype(&X509_STORE_free)> store(X509_STORE_new(), &X509_STORE_free);
    X509_STORE_load_file(store.get(), ca_file.c_str());
    std::unique_ptr<X509_STORE_CTX, decltype(&X509_STORE_CTX_free)> ctx(X509_STORE_CTX_new(),
                                                                        &X509_STORE_CTX_free);
    X509_STORE_CTX_init(ctx.get(), store.get(), cert.get(), nullptr);
    if (host != nullptr) X509_VERIFY_PARAM_set1_host(X509_STORE_CTX_get0_param(ctx.get()), host, 0);
    X509_verify_cert(ctx.get());
    return X509_STORE_CTX_get_error(ctx.get());
}

class TlsCertificatesTest : public ::testing::Test {
protected:
    void SetUp() override {
        dir_ = std::filesystem::temp_directory_path() / ("lockstep-tls-" + std::to_string(::getpid()));
        certs_ = make_tls_certificates(dir_.string());
    }
    void TearDown() override { std::filesystem::remove_all(dir_); }
    std::filesystem::path dir_;
    TlsCertificates certs_;
};

TEST_F(TlsCertificatesTest, EachCertificateVerifiesOrFailsAsItsNameSays) {
    EXPECT_EQ(verify(certs_.ca_file, certs_.server_cert, "localhost"), X509_V_OK);
    EXPECT_EQ(verify(certs_.ca_file, certs_.client_cert, nullptr), X509_V_OK);
    EXPECT_EQ(verify(certs_.ca_file, certs_.expired_cert, "localhost"), X509_V_ERR_CERT_HAS_EXPIRED);
    EXPECT_EQ(verify(certs_.ca_file, certs_.wrong_host_cert, "localhost"), X509_V_ERR_HOSTNAME_MISMATCH);
    EXPECT_EQ(verify(certs_.ca_file, certs_.foreign_cert, "localhost"),
              X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY);
    EXPECT_EQ(verify(certs_.foreign_ca_file, certs_.foreign_cert, "localhost"), X509_V_OK);
}

TEST_F(TlsCertificatesTest, TheServerCertificateNamesTheLoopbackAddress) {
    auto cert = read_cert(certs_.server_cert);
    EXPECT_EQ(X509_check_ip_asc(cert.get(), "127.0.0.1", 0), 1);
}

TEST_F(TlsCertificatesTest, KeysAreReadableByTheirOwnerOnly) {
    const auto perms = std::filesystem::status(certs_.server_key).permissions();
    EXPECT_EQ(perms & (std::filesystem::perms::group_all | std::filesystem::perms::others_all),
              std::filesystem::perms::none);
}

}  // namespace
}  // namespace lockstep
