// @dynamo/core's entry point. load-native.js runs first (ES modules evaluate their imports in
// order): it finds this platform's binary or throws an error naming the platform and the package
// to install. binding.js is the loader `napi build` generates, and holds the exports.
import './load-native.js';
export * from './binding.js';
