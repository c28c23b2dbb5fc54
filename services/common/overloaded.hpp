#pragma once
// overloaded{f, g, ...}: one callable from several lambdas, for std::visit
// over a variant with one lambda per alternative.

namespace kvrt {

template <class... Fs>
struct overloaded : Fs... {
  using Fs::operator()...;
};
template <class... Fs>
overloaded(Fs...) -> overloaded<Fs...>;

}  // namespace kvrt
